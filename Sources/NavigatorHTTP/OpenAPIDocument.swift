/// The OpenAPI 3.0 document of the HTTP API, served at `/v1/openapi.json`. Bodies are the
/// protos' messages in protobuf's canonical JSON mapping; the schemas below describe that
/// mapping for the messages the API takes and answers (proto/navigator/v1 is the schema of
/// record: 64-bit integers are strings, enums are their names, a oneof is one of its fields).
/// A test runs schemathesis against a real navigatord with it.
enum OpenAPIDocument {
    static let json = #"""
        {
          "openapi": "3.0.3",
          "info": {
            "title": "Navigator HTTP API",
            "version": "1",
            "description": "Intents, explain, snapshots, client events and session streams of navigatord. Bodies are navigator.v1 messages in protobuf's canonical JSON mapping; every response body of the JSON calls is a navigator.v1.Reply, errors included (rejected.code is the reject code)."
          },
          "paths": {
            "/v1/intents": {
              "post": {
                "summary": "Send an intent: fire and forget (202), or with wait=true its outcome, durable before the answer",
                "operationId": "sendIntent",
                "parameters": [
                  {"name": "wait", "in": "query", "required": false, "schema": {"type": "string", "enum": ["true", "false", "1", "0"]}},
                  {"$ref": "#/components/parameters/Traceparent"}
                ],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Intent"}}}},
                "responses": {
                  "200": {"$ref": "#/components/responses/Reply"},
                  "202": {"$ref": "#/components/responses/Reply"},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "409": {"$ref": "#/components/responses/Rejected"},
                  "413": {"$ref": "#/components/responses/Rejected"},
                  "415": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/explain": {
              "post": {
                "summary": "What an intent would do now; nothing changes",
                "operationId": "explainIntent",
                "parameters": [{"$ref": "#/components/parameters/Traceparent"}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Intent"}}}},
                "responses": {
                  "200": {"$ref": "#/components/responses/Reply"},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "413": {"$ref": "#/components/responses/Rejected"},
                  "415": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/sessions/{id}": {
              "get": {
                "summary": "The session's snapshot: tree, seq, epoch, conditions, parked intents",
                "operationId": "getSnapshot",
                "parameters": [{"$ref": "#/components/parameters/Session"}],
                "responses": {
                  "200": {"$ref": "#/components/responses/Reply"},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/sessions/{id}/events": {
              "post": {
                "summary": "Report what a client shell did on its tree",
                "operationId": "sendClientEvent",
                "parameters": [{"$ref": "#/components/parameters/Session"}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ClientEvent"}}}},
                "responses": {
                  "200": {"$ref": "#/components/responses/Reply"},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "409": {"$ref": "#/components/responses/Rejected"},
                  "413": {"$ref": "#/components/responses/Rejected"},
                  "415": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/sessions/{id}/stream": {
              "get": {
                "summary": "Follow the session: Server-Sent Events, or a WebSocket when the request is an upgrade",
                "description": "Events: snapshot, batch, recovered, rejection (data: a navigator.v1.StreamEvent in JSON; id: epoch:seq), and ': heartbeat' comments. Resume with Last-Event-ID or since=epoch:seq. The stream does not end by itself.",
                "operationId": "streamSession",
                "parameters": [
                  {"$ref": "#/components/parameters/Session"},
                  {"name": "since", "in": "query", "required": false, "schema": {"type": "string", "pattern": "^[0-9]+:[0-9]+$"}},
                  {"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "string", "pattern": "^[0-9]+:[0-9]+$"}}
                ],
                "responses": {
                  "200": {"description": "the stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/routes/check": {
              "post": {
                "summary": "Check a candidate route map: its problems as a reload would refuse it, or what it changes against the map in use; nothing is loaded (secure mode: a client that may read stats)",
                "operationId": "checkRoutes",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RoutesCheckRequest"}}}},
                "responses": {
                  "200": {"description": "a navigator.v1.Reply with routesCheck (valid false: the problems)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RoutesCheckReply"}}}},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"},
                  "413": {"$ref": "#/components/responses/Rejected"},
                  "415": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/routes/impact": {
              "post": {
                "summary": "Replay the instance's recorded intents (its flight recorder) against a candidate route map and the map in use: how outcomes would change, by route; nothing changes (secure mode: a client that may read stats)",
                "operationId": "routesImpact",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RoutesCheckRequest"}}}},
                "responses": {
                  "200": {"description": "a navigator.v1.Reply with routesImpact (check.valid false: the candidate's problems, nothing replayed)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RoutesImpactReply"}}}},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"},
                  "413": {"$ref": "#/components/responses/Rejected"},
                  "415": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/routes/rollout": {
              "get": {
                "summary": "Where the route map rollout stands, with each map version's figures on this instance (secure mode: a client that may read stats)",
                "operationId": "rolloutStatus",
                "responses": {
                  "200": {"description": "a navigator.v1.Reply with routesRollout", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RolloutReply"}}}},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              },
              "post": {
                "summary": "Start a staged rollout: sharePercent of the sessions (by a stable hash of their id) resolve with the candidate route map, on every instance (secure mode: a client that may read stats)",
                "operationId": "startRollout",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RolloutStartRequest"}}}},
                "responses": {
                  "200": {"description": "a navigator.v1.Reply with routesRollout (check.valid false: the candidate's problems, nothing started)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RolloutReply"}}}},
                  "400": {"$ref": "#/components/responses/Rejected"},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"},
                  "409": {"$ref": "#/components/responses/Rejected"},
                  "413": {"$ref": "#/components/responses/Rejected"},
                  "415": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/routes/rollout/promote": {
              "post": {
                "summary": "Every session resolves with the rollout's candidate, until a reload (SIGHUP); 409 CONFLICT when none is under way",
                "operationId": "promoteRollout",
                "responses": {
                  "200": {"description": "a navigator.v1.Reply with routesRollout", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RolloutReply"}}}},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"},
                  "409": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/routes/rollout/rollback": {
              "post": {
                "summary": "Every session resolves with the map in use again; 409 CONFLICT when no rollout is under way",
                "operationId": "rollBackRollout",
                "responses": {
                  "200": {"description": "a navigator.v1.Reply with routesRollout", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RolloutReply"}}}},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"},
                  "409": {"$ref": "#/components/responses/Rejected"},
                  "429": {"$ref": "#/components/responses/Rejected"},
                  "503": {"$ref": "#/components/responses/Rejected"}
                }
              }
            },
            "/v1/dashboard": {
              "get": {
                "summary": "The dashboard's data: the service's last hour, a sample every 5 s (secure mode: a client that may read stats)",
                "description": "Each sample holds what changed over its interval (intents by outcome, rejections by code, intents landed and not landed by route, acknowledged intents by time to land in the buckets of bounds, the last count beyond them) and the sessions and parked intents at its end. Oldest first; the last covers the time since the last full interval. Kept in memory only, from the start of the service.",
                "operationId": "getDashboard",
                "responses": {
                  "200": {"description": "the history", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Dashboard"}}}},
                  "401": {"$ref": "#/components/responses/Rejected"},
                  "403": {"$ref": "#/components/responses/Rejected"}
                }
              }
            }
          },
          "components": {
            "securitySchemes": {
              "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "Secure mode only: a token from navctl token (also taken as ?access_token= on streams). Without security no token is needed."}
            },
            "parameters": {
              "Traceparent": {"name": "traceparent", "in": "header", "required": false, "description": "W3C Trace Context: the intent's traceparent when its body names none", "schema": {"type": "string"}},
              "Session": {"name": "id", "in": "path", "required": true, "description": "The session id: 1 to 128 bytes, no '/' and no control characters", "schema": {"type": "string"}}
            },
            "responses": {
              "Reply": {"description": "a navigator.v1.Reply", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Reply"}}}},
              "Rejected": {"description": "a navigator.v1.Reply with rejected", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RejectedReply"}}}}
            },
            "schemas": {
              "Counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
              "Dashboard": {
                "type": "object",
                "required": ["intervalSeconds", "capacity", "landingWindowSeconds", "bounds", "samples"],
                "properties": {
                  "intervalSeconds": {"type": "number"},
                  "capacity": {"type": "integer"},
                  "landingWindowSeconds": {"type": "integer"},
                  "bounds": {"type": "array", "items": {"type": "number"}},
                  "samples": {"type": "array", "items": {
                    "type": "object",
                    "required": ["at", "seconds", "intents", "rejections", "landed", "notLanded", "land", "sessions", "parked"],
                    "properties": {
                      "at": {"type": "integer", "description": "the interval's end, unix milliseconds"},
                      "seconds": {"type": "number", "description": "the interval's length"},
                      "intents": {"$ref": "#/components/schemas/Counts"},
                      "rejections": {"$ref": "#/components/schemas/Counts"},
                      "landed": {"$ref": "#/components/schemas/Counts"},
                      "notLanded": {"$ref": "#/components/schemas/Counts"},
                      "land": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                      "sessions": {"type": "integer", "minimum": 0},
                      "parked": {"type": "integer", "minimum": 0}
                    }
                  }}
                }
              },
              "Uint64": {"oneOf": [{"type": "string", "pattern": "^[0-9]+$"}, {"type": "integer", "minimum": 0}], "nullable": true, "description": "a 64-bit number: a string, as protobuf's JSON mapping writes it (it also reads a number, and null as 0)"},
              "ScreenContext": {
                "type": "object",
                "properties": {
                  "screen": {"type": "string"},
                  "info": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "additionalProperties": false
              },
              "Intent": {
                "type": "object",
                "description": "navigator.v1.Intent",
                "properties": {
                  "id": {"type": "string", "description": "idempotency key, 1 to 128 bytes"},
                  "session": {"type": "string"},
                  "path": {"type": "array", "items": {"$ref": "#/components/schemas/ScreenContext"}},
                  "url": {"type": "string", "description": "a deep link the route map turns into a path"},
                  "animated": {"type": "boolean"},
                  "source": {"type": "string"},
                  "priority": {"type": "string", "enum": ["PRIORITY_NORMAL", "PRIORITY_HIGH", "PRIORITY_CRITICAL"]},
                  "ttlMs": {"type": "integer", "minimum": 0, "maximum": 4294967295},
                  "sentAtUnixNanos": {"type": "string", "pattern": "^-?[0-9]+$"},
                  "waitForReady": {"type": "boolean"},
                  "traceparent": {"type": "string", "description": "W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lowercase); one not of this form is dropped and counted"},
                  "setConditions": {"type": "object", "additionalProperties": {"type": "boolean"}}
                },
                "additionalProperties": false
              },
              "ClientEvent": {
                "description": "navigator.v1.ClientEvent: the position it was made at (lastSeq, epoch) and exactly one kind",
                "oneOf": [
                  {
                    "type": "object",
                    "required": ["ready"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "ready": {"type": "object", "properties": {"appVersion": {"type": "string", "nullable": true, "description": "the app's version, 1 to 4 numbers separated by dots (2.10.1); screens the route map marks since: a later one show their fallback"}}, "additionalProperties": false}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["suspended"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "suspended": {"type": "object", "additionalProperties": false}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["poppedTo"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "poppedTo": {"type": "object", "properties": {"screenId": {"$ref": "#/components/schemas/Uint64"}}, "additionalProperties": false}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["dismissedTo"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "dismissedTo": {"type": "object", "properties": {"modalId": {"$ref": "#/components/schemas/Uint64"}}, "additionalProperties": false}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["tabSelected"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "tabSelected": {"type": "object", "properties": {"tab": {"type": "string"}}, "additionalProperties": false}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["pushed"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "pushed": {"type": "object", "description": "stack (StackRef) and screen (Screen, an id in the client namespace >= 2^63)"}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["presented"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "presented": {"type": "object", "description": "modal (Modal)"}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["sync"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "sync": {"type": "object", "description": "tree (ScreenTree)"}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["ack"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "ack": {"type": "object", "properties": {"seq": {"$ref": "#/components/schemas/Uint64"}}, "additionalProperties": false}
                    },
                    "additionalProperties": false
                  },
                  {
                    "type": "object",
                    "required": ["conditions"],
                    "properties": {
                      "session": {"type": "string", "nullable": true},
                      "lastSeq": {"$ref": "#/components/schemas/Uint64"},
                      "epoch": {"$ref": "#/components/schemas/Uint64"},
                      "conditions": {"type": "object", "properties": {"set": {"type": "object", "nullable": true, "description": "null reads as no conditions, as protobuf's JSON mapping has it", "additionalProperties": {"type": "boolean"}}}, "additionalProperties": false}
                    },
                    "additionalProperties": false
                  }
                ]
              },
              "RoutesCheckRequest": {
                "type": "object",
                "description": "navigator.v1.RoutesCheckRequest",
                "properties": {
                  "yaml": {"type": "string", "nullable": true, "description": "the candidate route map, YAML or JSON (null reads as empty, as protobuf's JSON mapping has it)"},
                  "source": {"type": "string", "nullable": true, "description": "names it in problems (a file name)"}
                },
                "additionalProperties": false
              },
              "RoutesCheckReply": {
                "type": "object",
                "required": ["routesCheck"],
                "properties": {
                  "requestId": {"type": "string"},
                  "routesCheck": {
                    "type": "object",
                    "description": "navigator.v1.RoutesCheck",
                    "properties": {
                      "valid": {"type": "boolean"},
                      "problems": {"type": "array", "items": {"type": "object", "properties": {"line": {"type": "integer"}, "column": {"type": "integer"}, "keyPath": {"type": "string"}, "message": {"type": "string"}}}},
                      "changes": {"type": "array", "items": {"type": "object", "properties": {"kind": {"type": "string", "enum": ["added", "removed", "changed"]}, "subject": {"type": "string"}, "name": {"type": "string"}, "before": {"type": "string"}, "after": {"type": "string"}}}},
                      "currentSource": {"type": "string"},
                      "summary": {"type": "string"}
                    }
                  }
                }
              },
              "RolloutStartRequest": {
                "type": "object",
                "description": "navigator.v1.RoutesRolloutRequest (its action is START)",
                "properties": {
                  "yaml": {"type": "string", "nullable": true, "description": "the candidate route map, YAML or JSON"},
                  "source": {"type": "string", "nullable": true, "description": "names it (a file name)"},
                  "sharePercent": {"type": "number", "nullable": true, "description": "percent of sessions for the candidate: above 0, at most 100"},
                  "rollbackMarginPercent": {"type": "number", "nullable": true, "description": "roll back automatically beyond this many percentage points of rejection rate over the map in use (0: never)"},
                  "rollbackAfterIntents": {"type": "integer", "nullable": true, "description": "intents of the candidate before the margin is judged (0: 1,000; 10 to 10,000,000)"}
                },
                "additionalProperties": false
              },
              "RolloutReply": {
                "type": "object",
                "required": ["routesRollout"],
                "properties": {
                  "requestId": {"type": "string"},
                  "routesRollout": {
                    "type": "object",
                    "description": "navigator.v1.Rollout",
                    "properties": {
                      "phase": {"type": "string", "enum": ["ROLLOUT_PHASE_NONE", "ROLLOUT_PHASE_ROLLING", "ROLLOUT_PHASE_PROMOTED", "ROLLOUT_PHASE_ROLLED_BACK", "ROLLOUT_PHASE_ENDED"]},
                      "baseSource": {"type": "string"},
                      "baseVersion": {"type": "string"},
                      "candidateSource": {"type": "string"},
                      "candidateVersion": {"type": "string"},
                      "sharePercent": {"type": "number"},
                      "rollbackMarginPercent": {"type": "number"},
                      "rollbackAfterIntents": {"type": "integer"},
                      "startedAtUnixNanos": {"type": "string"},
                      "changedAtUnixNanos": {"type": "string"},
                      "note": {"type": "string"},
                      "maps": {"type": "array", "items": {"type": "object", "properties": {"version": {"type": "string"}, "role": {"type": "string"}, "intents": {"type": "string"}, "rejected": {"type": "string"}, "landed": {"type": "string"}, "notLanded": {"type": "string"}, "rejectionRate": {"type": "number"}, "landingRatio": {"type": "number"}}}},
                      "check": {"type": "object"},
                      "summary": {"type": "string"},
                      "revision": {"type": "string"}
                    }
                  }
                }
              },
              "RoutesImpactReply": {
                "type": "object",
                "required": ["routesImpact"],
                "properties": {
                  "requestId": {"type": "string"},
                  "routesImpact": {
                    "type": "object",
                    "description": "navigator.v1.RoutesImpact",
                    "properties": {
                      "check": {"type": "object"},
                      "intents": {"type": "integer"},
                      "oldestUnixNanos": {"type": "string"},
                      "newestUnixNanos": {"type": "string"},
                      "changed": {"type": "integer"},
                      "routes": {"type": "array", "items": {"type": "object", "properties": {"route": {"type": "string"}, "intents": {"type": "integer"}, "same": {"type": "integer"}, "changes": {"type": "array", "items": {"type": "object"}}}}},
                      "summary": {"type": "string"},
                      "recorderCapacity": {"type": "integer"}
                    }
                  }
                }
              },
              "Rejected": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                  "code": {"type": "string", "pattern": "^REJECT_CODE_[A-Z_]+$"},
                  "message": {"type": "string"},
                  "seq": {"$ref": "#/components/schemas/Uint64"},
                  "epoch": {"$ref": "#/components/schemas/Uint64"}
                }
              },
              "Reply": {
                "type": "object",
                "description": "navigator.v1.Reply: at most one of resolved, ignored, parked, rejected, snapshot, explanation, eventApplied",
                "properties": {
                  "requestId": {"type": "string"},
                  "resolved": {"type": "object"},
                  "ignored": {"type": "object", "properties": {"reason": {"type": "string"}}},
                  "parked": {"type": "object"},
                  "rejected": {"$ref": "#/components/schemas/Rejected"},
                  "snapshot": {"type": "object"},
                  "explanation": {"type": "object"},
                  "eventApplied": {"type": "object"},
                  "explanationSteps": {"type": "array", "items": {"type": "object"}}
                }
              },
              "RejectedReply": {
                "type": "object",
                "required": ["rejected"],
                "properties": {
                  "requestId": {"type": "string"},
                  "rejected": {"$ref": "#/components/schemas/Rejected"},
                  "explanationSteps": {"type": "array", "items": {"type": "object"}}
                }
              }
            }
          }
        }
        """#
}
