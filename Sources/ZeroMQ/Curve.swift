import CZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A CURVE (CurveZMQ) long-term key pair, each key as 40 characters of Z85 text.
///
/// A server sets ``SocketOption/curveServer`` and its secret key; a client sets its own pair and
/// the server's public key as ``SocketOption/curveServerKey``. A client with the wrong server key
/// never completes the handshake, so no message crosses.
public struct CurveKeyPair: Sendable, Hashable {
    public var publicKey: String
    public var secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Whether the loaded libzmq supports CURVE (built with libsodium).
    public static var isSupported: Bool { zeroMQHas("curve") }

    /// A fresh random key pair. Throws ``ZeroMQError/Code/notSupported`` without CURVE support.
    public static func generate() throws(ZeroMQError) -> CurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        _ = try ZMQ.call("zmq_curve_keypair") { zmq_curve_keypair(&publicKey, &secretKey) }
        return CurveKeyPair(publicKey: text(publicKey), secretKey: text(secretKey))
    }

    /// The public key that belongs to a Z85 secret key.
    public static func publicKey(forSecretKey secretKey: String) throws(ZeroMQError) -> String {
        var publicKey = [CChar](repeating: 0, count: 41)
        _ = try ZMQ.call("zmq_curve_public", detail: "secret key must be 40 Z85 characters") {
            zmq_curve_public(&publicKey, secretKey)
        }
        return text(publicKey)
    }

    /// Whether `key` is a CURVE key as Z85 text: 40 characters that decode to 32 bytes.
    public static func isValidKey(_ key: String) -> Bool {
        guard key.utf8.count == 40 else { return false }
        var bytes = [UInt8](repeating: 0, count: 32)
        return zmq_z85_decode(&bytes, key) != nil
    }

    /// A 32-byte key as Z85 text (40 characters).
    public static func z85(_ key: [UInt8]) -> String {
        precondition(key.count == 32, "a CURVE key has 32 bytes")
        var text = [CChar](repeating: 0, count: 41)
        _ = zmq_z85_encode(&text, key, key.count)
        return self.text(text)
    }

    /// The 32 bytes of a Z85 key; throws ``ZeroMQError/Code/invalidArgument`` for anything else.
    public static func z85Bytes(_ key: String) throws(ZeroMQError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        guard key.utf8.count == 40, zmq_z85_decode(&bytes, key) != nil else {
            throw ZeroMQError(code: .invalidArgument, function: "zmq_z85_decode", detail: "expected 40 Z85 characters")
        }
        return bytes
    }

    private static func text(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension CurveKeyPair {
    /// Why a key file cannot be used: the file and what is wrong with it.
    public struct KeyFileError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// A key kept as Z85 text in a file: the 40 characters of its first line (spaces and the
    /// line's end ignored). A `secret` key's file must be readable by its owner only, as ssh
    /// demands of its keys.
    public static func readKey(fromFile path: String, secret: Bool) throws(KeyFileError) -> String {
        var status = stat()
        guard stat(path, &status) == 0, let file = fopen(path, "r") else {
            throw KeyFileError(description: "\(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        if secret, status.st_mode & 0o077 != 0 {
            throw KeyFileError(
                description:
                    "\(path) has mode \(String(status.st_mode & 0o777, radix: 8)); expected it readable by its owner only (chmod 600 \(path))"
            )
        }
        var line = [CChar](repeating: 0, count: 128)
        let text = fgets(&line, Int32(line.count), file) == nil ? "" : Self.text(line)
        let key = String(text.filter { !$0.isWhitespace })
        guard isValidKey(key) else {
            throw KeyFileError(description: "\(path) does not hold a CURVE key; expected 40 Z85 characters")
        }
        return key
    }

    /// The key pair of a secret key file (``readKey(fromFile:secret:)``): the public key is
    /// derived from the secret one.
    public static func load(secretKeyFile path: String) throws(KeyFileError) -> CurveKeyPair {
        let secret = try readKey(fromFile: path, secret: true)
        guard let publicKey = try? publicKey(forSecretKey: secret) else {
            throw KeyFileError(description: "\(path) does not hold a CURVE secret key")
        }
        return CurveKeyPair(publicKey: publicKey, secretKey: secret)
    }
}

extension Socket {
    /// Makes this socket a CURVE server with the given key pair.
    public func makeCurveServer(_ keys: CurveKeyPair) throws(ZeroMQError) {
        try set(.curveServer, true)
        try set(.curveSecretKey, keys.secretKey)
        try set(.curvePublicKey, keys.publicKey)
    }

    /// Makes this socket a CURVE client of the server whose public key is `serverKey`.
    public func makeCurveClient(_ keys: CurveKeyPair, serverKey: String) throws(ZeroMQError) {
        try set(.curveServerKey, serverKey)
        try set(.curvePublicKey, keys.publicKey)
        try set(.curveSecretKey, keys.secretKey)
    }
}
