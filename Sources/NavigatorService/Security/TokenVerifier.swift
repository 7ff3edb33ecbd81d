import Foundation
import JWTKit
import NavigatorClient

/// Checks the bearer tokens of HTTP calls in secure mode (``AccessToken``, HS256 with the key in
/// `security.tokenKeyFile`).
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
        do {
            return .success(try await keys.value.verify(token, as: AccessToken.self))
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            return .failure(
                TokenRefusal(
                    reason: "the token expired; get a new one and reconnect (streams resume from their last id)"))
        } catch {
            return .failure(TokenRefusal(reason: "the token is not valid: \(error)"))
        }
    }
}

/// Why a bearer token is not taken.
struct TokenRefusal: Error {
    let reason: String
}
