import Foundation
import JWTKit

/// The secret that signs and checks navigatord's bearer tokens (HS256): a file of at least 32
/// bytes of secret text, readable by its owner only (`head -c 32 /dev/urandom | base64 >
/// token.key; chmod 600 token.key`) — navigatord's `security.tokenKeyFile`, and what `navctl token`
/// signs with.
public struct TokenKey: Sendable {
    private let keys: JWTKeyCollection

    /// Why a token key file cannot be used.
    public struct FileError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Reads the key file: its first line, whitespace removed; refused when others may read it or
    /// it holds fewer than 32 bytes.
    public static func load(file path: String) async throws(FileError) -> TokenKey {
        let attributes: [FileAttributeKey: Any]
        let contents: Data
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
            contents = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw FileError(description: "token key file \(path) cannot be read: \(error.localizedDescription)")
        }
        if let mode = attributes[.posixPermissions] as? Int, mode & 0o077 != 0 {
            throw FileError(
                description:
                    "token key file \(path) has mode \(String(mode & 0o777, radix: 8)); expected it readable by its owner only (chmod 600 \(path))"
            )
        }
        let line = String(decoding: contents.prefix { $0 != 0x0A }, as: UTF8.self).filter { !$0.isWhitespace }
        guard line.utf8.count >= 32 else {
            throw FileError(
                description:
                    "token key file \(path) holds \(line.utf8.count) bytes; expected at least 32 (head -c 32 /dev/urandom | base64 > \(path))"
            )
        }
        return TokenKey(keys: await JWTKeyCollection().add(hmac: HMACKey(from: line), digestAlgorithm: .sha256))
    }

    /// `token`, signed.
    public func sign(_ token: AccessToken) async throws -> String { try await keys.sign(token) }

    /// Signs claims of any shape (tests: tokens a hostile issuer might write), with `header`.
    public func sign(_ payload: some JWTPayload, header: JWTHeader) async throws -> String {
        try await keys.sign(payload, header: header)
    }

    /// The token's claims, or why it is not taken: the header must name HS256 (a token may not
    /// choose how it is checked), the signature must hold, and the claims' times must make sense
    /// (``AccessToken/check(issuedAt:expiresAt:notBefore:now:)``) before anything uses them.
    public func verify(_ token: String) async -> Result<AccessToken, TokenRefusal> {
        if let problem = Self.headerProblem(token) { return .failure(TokenRefusal(reason: problem)) }
        do {
            return .success(try await keys.verify(token, as: AccessToken.self))
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
public struct TokenRefusal: Error, Sendable {
    public let reason: String
}
