import Foundation
import NavigatorClient
import NavigatorEngine
import NavigatorTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `navctl shell` on a pseudo-terminal of the test's own: what a person would see.
final class PseudoTerminalShell: @unchecked Sendable {
    // @unchecked: `process` and the descriptors are touched by the owning test only; the output
    // is behind a Mutex shared with the reading thread.
    let process = ChildProcess()
    let master: Int32
    /// Reads the terminal's output; it owns `master` and closes it once it has read the end (a
    /// descriptor closed under a blocked reader could be reused, and read, by anything else).
    private var output: ChildOutput?

    init(_ arguments: [String], rows: Int, columns: Int) throws {
        // Linux's pseudo-terminal multiplexer; posix_openpt and friends are not in Swift's Glibc
        // module. TIOCSPTLCK (unlock) and TIOCGPTN (the number of /dev/pts/N) are function-like
        // macros there, so their values are spelt out.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw ClientError(.socket, "no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard slave >= 0 else { throw ClientError(.socket, "cannot open the pseudo-terminal's other end") }
        defer { close(slave) }
        resize(rows: rows, columns: columns)
        let binary = BuiltProducts.executable("navctl")
        process.executableURL = binary
        process.arguments = ["shell"] + arguments
        process.standardInput = slave
        process.standardOutput = slave
        process.standardError = slave
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = nil
        environment["TERM"] = "xterm"
        process.environment = environment
        try process.run()
        output = ChildOutput(reading: FileHandle(fileDescriptor: master, closeOnDealloc: true))
    }

    func resize(rows: Int, columns: Int) {
        var size = winsize(ws_row: UInt16(rows), ws_col: UInt16(columns), ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        if process.isRunning { kill(process.processIdentifier, SIGWINCH) }
    }

    func type(_ text: String) {
        var bytes = Array(text.utf8)
        _ = write(master, &bytes, bytes.count)
    }

    /// The last whole frame drawn, without styles: one string per screen line. A frame is whole
    /// once its last line, the keys (kept by any fitting), has arrived: the terminal's output is
    /// read in pieces, and the newest frame may so far be its clearing only.
    var screen: [String] {
        let text = output?.text ?? ""
        for frame in text.components(separatedBy: "\u{1B}[H\u{1B}[2J").dropFirst().reversed() {
            let plain = frame.replacingOccurrences(
                of: "\u{1B}\\[[0-9;?]*[A-Za-z]", with: "", options: .regularExpression)
            let lines = plain.replacingOccurrences(of: "\r", with: "").components(separatedBy: "\n")
            if lines.last?.hasSuffix("quit") == true { return lines }
        }
        return []
    }

    /// Waits (bounded) until the screen satisfies `condition`.
    func waitFor(_ what: String, _ condition: ([String]) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while !condition(screen) {
            guard ContinuousClock.now < deadline else {
                throw ClientError(
                    .timeout, "the shell never showed \(what); it shows:\n\(screen.joined(separator: "\n"))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func stop() {
        if process.isRunning {
            type("q")
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < deadline { usleep(10_000) }
            if process.isRunning { process.terminate() }
        }
        process.waitUntilExit()
        // The child is gone and the other end closed: the reader reads EIO and lets go of the
        // descriptor.
        output?.waitForEndBlocking()
    }
}

@Suite("navctl shell on a terminal", .serialized)
struct ShellTerminalTests {
    @Test(
        "fits the terminal and redraws on resize; shows rejections inline; a condition set from navctl releases a parked intent"
    )
    func shellOnATerminal() async throws {
        try await withConnection { _, server in
            let endpoints = server.endpoints
            let options = [
                "--intents", endpoints.intents[0], "--requests", endpoints.requests[0], "--commands",
                endpoints.commands[0],
            ]
            let shell = try PseudoTerminalShell(
                ["--session", "t", "--app-version", "2.1"] + options, rows: 14, columns: 50)
            defer { shell.stop() }
            try await shell.waitFor("the tree") { $0.contains { $0.contains("home#1") } }
            // Its ready (sent once it has the tree) said the app version: the session holds it.
            let versionDeadline = ContinuousClock.now + .seconds(15)
            var snapshot = try await navctl(["snapshot", "--session", "t"] + options)
            while !snapshot.output.contains("its shell's app version 2.1"), ContinuousClock.now < versionDeadline {
                try await Task.sleep(for: .milliseconds(50))
                snapshot = try await navctl(["snapshot", "--session", "t"] + options)
            }
            #expect(snapshot.output.contains("its shell's app version 2.1"), "\(snapshot.output)")
            try await shell.waitFor("connected in the header") { $0.first?.contains("connected") == true }
            let frame = shell.screen
            #expect(frame.allSatisfy { $0.count <= 50 && !$0.hasSuffix(" ") }, "\(frame)")
            #expect(frame.count <= 14, "\(frame)")

            // Wider: the legend fits on one line again.
            shell.resize(rows: 30, columns: 140)
            try await shell.waitFor("the legend on one line") {
                $0.contains { $0.hasPrefix("name#N: a screen and its id") && $0.hasSuffix("the top screen") }
            }

            _ = try await navctl(["send", "--session", "t", "--listen", "0", "chta"] + options)
            try await shell.waitFor("the rejection") { $0.contains { $0.contains("rejected") && $0.contains("chta") } }

            let parked = try await navctl(
                ["send", "--wait", "--session", "t", "--id", "edit", "editProfile"] + options)
            #expect(parked.output.hasPrefix("parked: waiting for authenticated"))
            try await shell.waitFor("login presented") { $0.contains { $0.contains("login#") } }
            let condition = try await navctl(["condition", "--session", "t", "authenticated=true"] + options)
            #expect(condition.output.contains("released edit"))
            try await shell.waitFor("the released intent") {
                $0.contains { $0.contains("audit: released edit") } && $0.contains { $0.contains("editProfile#") }
            }

            // The shell shows what a parked intent waits for, and g satisfies the guard.
            _ = try await navctl(["condition", "--session", "t", "authenticated=false"] + options)
            let payment = try await navctl(
                [
                    "send", "--wait", "--session", "t", "--id", "pay1", "payment", "conversationId=1", "amount=5",
                    "currency=EUR",
                ] + options)
            #expect(payment.output.hasPrefix("parked: waiting for authenticated"))
            try await shell.waitFor("the parked intent and the key") {
                $0.contains { $0.contains("parked pay1: waiting for authenticated (showing login)") }
                    && $0.contains { $0.contains("press g to set authenticated=true") }
            }
            shell.type("g")
            try await shell.waitFor("the payment released by g") {
                $0.contains { $0.contains("audit: released pay1") } && $0.contains { $0.contains("payment(") }
                    && $0.contains { $0.contains("conditions: authenticated=true") }
            }
        }
    }

    @Test("started before navigatord, the shell says not responding, then catches up by itself")
    func catchesUp() async throws {
        let directory = TestService.temporaryDirectory("navshell")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let endpoints = ["intents", "requests", "commands"].map { "ipc://\(directory.path)/\($0).sock" }
        let shell = try PseudoTerminalShell(
            [
                "--session", "late", "--timeout", "0.5", "--intents", endpoints[0], "--requests", endpoints[1],
                "--commands", endpoints[2],
            ], rows: 20, columns: 100)
        defer { shell.stop() }
        try await shell.waitFor("not responding") { $0.first?.contains("not responding") == true }

        var configuration = TestService.configuration(dataDirectory: directory.appendingPathComponent("data"))
        configuration.intentEndpoints = [endpoints[0]]
        configuration.requestEndpoints = [endpoints[1]]
        configuration.commandEndpoints = [endpoints[2]]
        let server = try Engine(configuration: configuration, logger: TestService.logger("shell-late"))
        try await server.start()
        do {
            try await shell.waitFor("the tree, connected") {
                $0.first?.contains("— connected —") == true && $0.contains { $0.contains("home#1") }
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}
