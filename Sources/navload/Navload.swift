import ArgumentParser
import Foundation
import NavigatorClient
import NavigatorCore
import NavigatorLoad
import NavigatorMix

@main
struct Navload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "navload",
        abstract: "Load-test publisher for Navigator, and benchmarks.",
        discussion: """
            navload run (the default) publishes intents open-loop at a target rate to a running \
            navigatord and reports end-to-end latency (from each intent's due time to its batch's \
            arrival at a subscribed shell), loss, outcomes and the service's CPU and memory. \
            navload resolver measures the resolver alone, without sockets; navload http the \
            latency of acknowledged intents over the HTTP API.

            Exit status: 0 the run finished; 1 no answer, or another failure; 2 a key file or \
            server key that cannot be used (or several navigatord processes and none certain: \
            pass --service-pid); 3 navigatord refused a request; 64 a command-line mistake.
            """,
        version: "0.1.0",
        subcommands: [RunCommand.self, ResolverCommand.self, RelayCommand.self, HTTPCommand.self],
        defaultSubcommand: RunCommand.self
    )
}

struct RelayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract:
            "A raw libzmq relay for navload run --floor (binds PULL and XPUB on free 127.0.0.1 ports or ipc, and prints them).",
        discussion: """
            Forwards every message received on the PULL socket to the XPUB socket after a topic \
            frame, one thread polling both, until its standard input closes. navload run --floor \
            starts it and reads its CPU: what libzmq alone costs per message at the run's rate.
            """
    )

    @Option(
        help:
            "Spin this many nanoseconds on each message before publishing it, standing in for a service's work per message (navload run --floor-work sets it)."
    )
    var workNanoseconds: Int64 = 0
    @Flag(
        help:
            "Publish each message as navigatord publishes a batch: the topic, a 36-byte header and a 190-byte payload that starts with the message (navload run --floor-batches sets it)."
    )
    var batches = false
    @Option(
        help:
            "How the PULL socket is reached: tcp (loopback, a free port) or ipc (the socket pull in --ipc-directory). navload run --floor uses its --intents endpoint's."
    )
    var pullTransport: RelayFloor.Transport = .tcp
    @Option(
        help: "The same for the XPUB socket (its socket: xpub); navload run --floor uses its --commands endpoint's.")
    var xpubTransport: RelayFloor.Transport = .tcp
    @Option(help: "The directory of the ipc sockets (navload run --floor makes one and removes it after).")
    var ipcDirectory: String?

    func validate() throws {
        if pullTransport == .ipc || xpubTransport == .ipc, ipcDirectory == nil {
            throw ValidationError("an ipc transport binds its socket in a directory; expected --ipc-directory DIR")
        }
        guard workNanoseconds >= 0, workNanoseconds <= Int64(RelayFloor.maxWorkMicroseconds) * 1000 else {
            throw ValidationError(
                "--work-nanoseconds \(workNanoseconds) is out of range; expected 0 to \(Int64(RelayFloor.maxWorkMicroseconds) * 1000) ns"
            )
        }
    }

    func run() throws {
        do {
            try RelayFloor.serve(
                workNanoseconds: workNanoseconds, batches: batches, pull: pullTransport, xpub: xpubTransport,
                directory: ipcDirectory)
        } catch {
            FileHandle.standardError.write(Data("navload relay: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

struct ResolverCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolver",
        abstract: "Resolutions per second on one core for a realistic mix on the demo map (no sockets)."
    )

    @Option(help: "How long to measure, in seconds.")
    var duration: Double = 5

    @Option(help: "How many sessions the mix is spread over.")
    var sessions: Int = 1000

    @Option(help: "Seed of the intent mix (the same seed gives the same mix).")
    var seed: UInt64 = 1

    @Flag(
        help:
            "Keep each session as the resolver found it while it resolves, as navigatord's flight recorder does (the arrays a resolution changes are then copied first, as in the service)."
    )
    var keepBefore = false

    func validate() throws {
        guard duration > 0, duration <= 3600 else {
            throw ValidationError("--duration \(duration) is out of range; expected 0 < seconds <= 3600")
        }
        guard sessions > 0, sessions <= 10_000_000 else {
            throw ValidationError("--sessions \(sessions) is out of range; expected 1 to 10,000,000")
        }
    }

    func run() throws {
        let benchmark = ResolverBenchmark(
            map: .demo, sessions: sessions, duration: .milliseconds(Int(duration * 1000)), seed: seed,
            keepingBefore: keepBefore)
        print(
            "resolver: demo map, \(sessions) sessions, \(duration) s, seed \(seed), one thread\(keepBefore ? ", each session kept as found" : "")"
        )
        let report = try benchmark.run()
        let rate = Int(report.perSecond.rounded())
        print("operations: \(report.operations) in \(String(format3(report.seconds))) s")
        print("rate:       \(rate) operations/s (\(String(format3(report.nanosecondsEach))) ns each)")
        let outcomes = report.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
            separator: ", ")
        print("outcomes:   \(outcomes); client events \(report.events); released \(report.released)")
        print(
            "sessions:   \(format3(report.meanScreens)) screens and \(format3(report.meanParked)) parked intents each at the end"
        )
    }
}

/// Three decimals, without Foundation.
func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded()
    let whole = Int(scaled / 1000)
    let fraction = Int(abs(scaled).truncatingRemainder(dividingBy: 1000))
    let padded =
        String(fraction).count < 3
        ? String(repeating: "0", count: 3 - String(fraction).count) + String(fraction) : String(fraction)
    return "\(whole).\(padded)"
}

extension RelayFloor.Transport: ExpressibleByArgument {}
