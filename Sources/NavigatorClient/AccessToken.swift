import Foundation
import JWTKit
import ZeroMQ

/// A bearer token for navigatord's HTTP side in secure mode: a JWT (HS256) naming a client of the
/// access file (`sub`), with that client's role and sessions, when it was issued and when it
/// expires. navigatord verifies the signature and the expiry, then authorizes the client by its
/// current entry in the access file — so removing a client (SIGHUP) stops its tokens too.
/// `navctl token` issues one.
public struct AccessToken: JWTPayload, Equatable {
    public var sub: SubjectClaim
    public var iat: IssuedAtClaim
    public var exp: ExpirationClaim
    public var role: String
    public var sessions: [String]

    public init(client: String, role: String, sessions: [String], issuedAt: Date = Date(), lifetime: TimeInterval) {
        sub = SubjectClaim(value: client)
        iat = IssuedAtClaim(value: issuedAt)
        exp = ExpirationClaim(value: issuedAt.addingTimeInterval(lifetime))
        self.role = role
        self.sessions = sessions
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }

    public var client: String { sub.value }
    public var expiresAt: Date { exp.value }

    /// The signing key in a file: at least 32 bytes of secret text, readable by its owner only
    /// (`head -c 32 /dev/urandom | base64 > token.key; chmod 600 token.key`).
    public static func readKey(_ path: String) throws(ClientError) -> HMACKey {
        let text: String
        do {
            text = try CurveKeyPair.readSecretText(fromFile: path)
        } catch {
            throw ClientError(.invalidArgument, "token key file \(error)")
        }
        guard text.utf8.count >= 32 else {
            throw ClientError(
                .invalidArgument,
                "token key file \(path) holds \(text.utf8.count) bytes; expected at least 32 (head -c 32 /dev/urandom | base64 > \(path))"
            )
        }
        return HMACKey(from: text)
    }

    /// The keys to sign and verify tokens with.
    public static func keys(_ key: HMACKey) async -> JWTKeyCollection {
        await JWTKeyCollection().add(hmac: key, digestAlgorithm: .sha256)
    }

    /// This token, signed.
    public func signed(with keys: JWTKeyCollection) async throws -> String {
        try await keys.sign(self)
    }
}
