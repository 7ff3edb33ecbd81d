import ArgumentParser
import Foundation
import NavigatorTokens

/// `navctl token CLIENT`: a bearer token for navigatord's HTTP side in secure mode.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a bearer token (JWT) for navigatord's HTTP API and streams in secure mode.",
        discussion: """
            The token names CLIENT, a client of navigatord's access file, and carries the role \
            and sessions given here for the app's own use; navigatord authorizes each call by \
            CLIENT's entry in its access file as it is then (removing the client there, and \
            SIGHUP, stops its tokens too). It is signed with the token key file navigatord has \
            as security.tokenKeyFile (a secret of at least 32 bytes, mode 0600: \
            head -c 32 /dev/urandom | base64 > token.key; chmod 600 token.key). Send it as \
            "Authorization: Bearer TOKEN", or as ?access_token=TOKEN where a browser cannot set \
            headers (EventSource, WebSocket). A stream is closed when its token expires: get a \
            new token and reconnect, resuming from the last event id.

            Example: navctl token alice-phone --token-key-file token.key --role shell --sessions alice --ttl 3600
            """)

    @Argument(help: "The client's name, as in navigatord's access file.")
    var client: String

    @Option(help: "The file with the key that signs tokens (navigatord's security.tokenKeyFile).")
    var tokenKeyFile: String

    @Option(help: "The client's role, as in the access file: producer, shell or admin.")
    var role = "shell"

    @Option(help: "The client's sessions, comma-separated, as in the access file (exact ids, or prefixes ending in *).")
    var sessions = ""

    @Option(help: "Seconds until the token expires.")
    var ttl: Int = 3600

    func validate() throws {
        guard ["producer", "shell", "admin"].contains(role) else {
            throw ValidationError("--role \(role) is not a role; expected producer, shell or admin")
        }
        guard ttl > 0, ttl <= 31 * 86_400 else {
            throw ValidationError("--ttl \(ttl) is out of range; expected 1 to 2678400 seconds (31 days)")
        }
        guard !client.isEmpty else { throw ValidationError("CLIENT must not be empty") }
    }

    func run() async throws {
        let token = AccessToken(
            client: client, role: role, sessions: sessions.split(separator: ",").map(String.init),
            lifetime: TimeInterval(ttl))
        do {
            print(try await TokenKey.load(file: tokenKeyFile).sign(token))
        } catch let error as TokenKey.FileError {
            FileHandle.standardError.write(Data("navctl: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
