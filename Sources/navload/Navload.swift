import ArgumentParser

@main
struct Navload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "navload",
        abstract: "Load-test publisher for Navigator: open-loop intents at a target rate, end-to-end latency report.",
        discussion: """
            This build carries the foundation only; the load generator is not in it yet, so \
            navload exits with status 1 after saying so.
            """,
        version: "0.1.0"
    )

    func run() throws {
        print("navload: the load generator is not part of this build yet (see --help)")
        throw ExitCode(1)
    }
}
