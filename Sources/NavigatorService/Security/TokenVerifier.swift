import Foundation
import JWTKit
import NavigatorClient

/// Checks the bearer tokens of HTTP calls in secure mode (``AccessToken``, HS256 with the key in
/// `security.tokenKeyFile`): the header must name HS256 (a token may not choose how it is
/// checked), the signature must hold, and the claims' times must make sense
/// (``AccessToken/check(issuedAt:expiresAt:notBefore:now:)``) before anything uses them.
final class TokenVerifier: Sendable {
    private let keys: Task<JWTKeyCollection, Never>

    init(keyFile: String) throws(ConfigurationError) {
        let key: HMACKey
        do {
            key = try AccessToken.readKey(keyFile)
        } catch {
            throw ConfigurationError("\(error)")
        }
        keys = Task { await AccessToken.keys(key) }
    }

    /// The token's claims, or why it is not taken.
    func verify(_ token: String) async -> Result<AccessToken, TokenRefusal> {
        if let problem = Self.headerProblem(token) { return .failure(TokenRefusal(reason: problem)) }
        do {
            return .success(try await keys.value.verify(token, as: AccessToken.self))
        } catch let refusal as AccessToken.ClaimRefusal {
            return .failure(TokenRefusal(reason: refusal.description))
        } catch {
            return .failure(TokenRefusal(reason: "the token is not valid: \(error)"))
        }
    }

    /// Why the token's header is not one of ours (`{"alg":"HS256"...}`), or nil if it is.
    static func headerProblem(_ token: String) -> String? {
        guard let dot = token.firstIndex(of: "."), dot > token.startIndex else {
            return "the token is not a JWT (header.payload.signature)"
        }
        var base64 = token[..<dot].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard base64.utf8.count <= 1024, let data = Data(base64Encoded: base64),
            let header = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return "the token's header is not base64url JSON" }
        guard header["alg"] as? String == "HS256" else {
            return "the token's header names alg \(String(describing: header["alg"] ?? "none")); expected HS256"
        }
        return nil
    }
}

/// Why a bearer token is not taken.
struct TokenRefusal: Error {
    let reason: String
}
