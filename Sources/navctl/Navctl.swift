import ArgumentParser

@main
struct Navctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "navctl",
        abstract: "Terminal client for Navigator: watch a session, act as a client shell, send intents, ask why.",
        discussion: """
            This build carries the foundation only; navctl's commands are not in it yet, so it \
            exits with status 1 after saying so.
            """,
        version: "0.1.0"
    )

    func run() throws {
        print("navctl: no commands are part of this build yet (see --help)")
        throw ExitCode(1)
    }
}
