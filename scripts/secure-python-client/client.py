#!/usr/bin/env python3
"""A client written from the wire protocol's description alone (docs/wire-protocol.md), in Python (pyzmq + protoc's Python output):
connects to a secure navigatord with its own key pair, takes a snapshot of the session it owns,
and is refused one it does not own (REJECT_CODE_FORBIDDEN). Exit status 0 when both hold.

usage: client.py REQUESTS_ENDPOINT SERVER_PUB CLIENT_KEY OWN_SESSION OTHER_SESSION
(the generated navigator/v1/*_pb2.py must be on PYTHONPATH)
"""
import sys

import zmq
from navigator.v1 import service_pb2

endpoint, server_pub, client_key, own, other = sys.argv[1:6]

ctx = zmq.Context()
server_key = open(server_pub).read().strip().encode()
secret = open(client_key).read().strip().encode()
dealer = ctx.socket(zmq.DEALER)
dealer.curve_serverkey = server_key
dealer.curve_secretkey = secret
dealer.curve_publickey = zmq.curve_public(secret)
dealer.rcvtimeo = 5000
dealer.linger = 0
dealer.connect(endpoint)


def snapshot(request_id, session):
    request = service_pb2.Request(request_id=request_id)
    request.snapshot.session = session
    dealer.send_multipart([b"", request.SerializeToString()])
    frames = dealer.recv_multipart()
    reply = service_pb2.Reply()
    reply.ParseFromString(frames[-1])
    assert reply.request_id == request_id, reply
    return reply


mine = snapshot("1", own)
assert mine.WhichOneof("kind") == "snapshot", mine
print(f"snapshot of {own}: seq {mine.snapshot.seq}, {len(mine.snapshot.tree.SerializeToString())} bytes of tree")
theirs = snapshot("2", other)
assert theirs.WhichOneof("kind") == "rejected", theirs
assert theirs.rejected.code == service_pb2.REJECT_CODE_FORBIDDEN, theirs
print(f"snapshot of {other}: {service_pb2.RejectCode.Name(theirs.rejected.code)}: {theirs.rejected.message}")
