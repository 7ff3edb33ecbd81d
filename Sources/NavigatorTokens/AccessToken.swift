import Foundation
import JWTKit

/// A bearer token for navigatord's HTTP side in secure mode: a JWT (HS256) naming a client of the
/// access file (`sub`), with that client's role and sessions, when it was issued and when it
/// expires. navigatord verifies the signature and the expiry, then authorizes the client by its
/// current entry in the access file — so removing a client (SIGHUP) stops its tokens too.
/// `navctl token` issues one.
public struct AccessToken: JWTPayload, Equatable {
    public var sub: SubjectClaim
    public var iat: IssuedAtClaim
    public var exp: ExpirationClaim
    /// Not before (optional; `navctl token` does not set it).
    public var nbf: NotBeforeClaim?
    public var role: String
    public var sessions: [String]

    public init(client: String, role: String, sessions: [String], issuedAt: Date = Date(), lifetime: TimeInterval) {
        sub = SubjectClaim(value: client)
        iat = IssuedAtClaim(value: issuedAt)
        exp = ExpirationClaim(value: issuedAt.addingTimeInterval(lifetime))
        self.role = role
        self.sessions = sessions
    }

    /// The longest a token may live (`navctl token --ttl` issues at most this).
    public static let maxLifetime: TimeInterval = 31 * 86_400
    /// How far the issuer's clock may be ahead of navigatord's.
    public static let clockSkew: TimeInterval = 60

    /// Checks the claims before anything is computed from them: a token issued in the future,
    /// living longer than ``maxLifetime`` or already expired is refused (``ClaimRefusal``).
    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try Self.check(issuedAt: iat.value, expiresAt: exp.value, notBefore: nbf?.value, now: Date())
    }

    /// Why a token's times are not taken.
    public struct ClaimRefusal: Error, CustomStringConvertible {
        public let description: String
        /// Whether the token is refused only because it expired (refresh it).
        public let expired: Bool
    }

    /// The claims' times, checked: finite, issued no later than `now` (with ``clockSkew``),
    /// expiring after `now` and at most ``maxLifetime`` after issue.
    public static func check(issuedAt: Date, expiresAt: Date, notBefore: Date? = nil, now: Date) throws(ClaimRefusal) {
        let issued = issuedAt.timeIntervalSince1970
        let expires = expiresAt.timeIntervalSince1970
        guard issued.isFinite, expires.isFinite, notBefore?.timeIntervalSince1970.isFinite ?? true else {
            throw ClaimRefusal(description: "the token's iat, exp or nbf is not a finite time", expired: false)
        }
        if let notBefore, notBefore.timeIntervalSince1970 > now.timeIntervalSince1970 + clockSkew {
            throw ClaimRefusal(description: "the token is not valid yet (nbf lies in the future)", expired: false)
        }
        guard issued <= now.timeIntervalSince1970 + clockSkew else {
            throw ClaimRefusal(
                description: "the token's iat lies in the future; expected a token issued by now", expired: false)
        }
        guard expires > now.timeIntervalSince1970 else {
            throw ClaimRefusal(
                description: "the token expired; get a new one and reconnect (streams resume from their last id)",
                expired: true)
        }
        guard expires - issued <= maxLifetime + clockSkew else {
            throw ClaimRefusal(
                description:
                    "the token lives \(expires - issued) seconds from iat to exp; expected at most \(Int(maxLifetime)) (31 days)",
                expired: false)
        }
    }

    public var client: String { sub.value }
    public var expiresAt: Date { exp.value }
}
