import ArgumentParser

@main
struct Navigatord: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "navigatord",
        abstract: "The Navigator service: resolves routing intents into navigation commands for client shells.",
        discussion: """
            Producers PUSH routing intents to the intents socket (default tcp://127.0.0.1:7401); \
            clients send requests to the requests socket (tcp://127.0.0.1:7402); client shells \
            SUB to command batches on the commands socket (tcp://127.0.0.1:7403). The wire \
            protocol is described in the README and in proto/navigator/v1.

            This build carries the foundation only (wire protocol and ZeroMQ layer); the service \
            itself is not in it yet, so navigatord exits with status 1 after saying so.
            """,
        version: "0.1.0"
    )

    func run() throws {
        print("navigatord: the service is not part of this build yet (see --help)")
        throw ExitCode(1)
    }
}
