import ArgumentParser
import Foundation
import NavigatorClient
import NavigatorLoad

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Publish intents open-loop at a rate and report latency, loss and outcomes.",
        discussion: """
            Intents come from a mix drawn from navigatord's own route map (pushes, modals, paths, \
            deep links, tab switches, refreshes, duplicates, a share of invalid intents), spread \
            over --sessions sessions and sent by --producers threads on a fixed schedule: a late \
            send keeps its due time, so a slow service shows as latency. Every intent is drawn and \
            encoded before the clock starts. Latency is recorded in an HdrHistogram after \
            --warmup. The report ends with the service's throughput (how fast its counters \
            accounted for everything sent) and its CPU and memory.

            Several instances (PostgreSQL): navload asks the instance at --requests for the live \
            instances and follows them all (their commands sockets, counters, CPU and memory, \
            added up); intents go to the --intents endpoints given, and an instance forwards \
            those of sessions it does not serve to their owner.

            Example: navload --rate 10000 --duration 10
            """)

    @Option(
        help:
            "navigatord's intents endpoint; repeat it to spread the intents over several instances (each producer connects to all and sends to them in turn)."
    )
    var intents: [String] = ["tcp://127.0.0.1:7401"]
    @Option(help: "navigatord's requests endpoint.") var requests = "tcp://127.0.0.1:7402"
    @Option(help: "navigatord's commands endpoint.") var commands = "tcp://127.0.0.1:7403"
    @Option(
        help:
            "Seconds to wait for navigatord's answers, and after the run for it to account for every intent sent (a saturated run's backlog may need more); without that, throughput and CPU per intent (and per stream batch) are unknown."
    ) var timeout: Double = 5
    @Option(help: "Intents per second, in all.") var rate: Double = 10_000
    @Option(help: "Seconds measured (after the warm-up).") var duration: Double = 10
    @Option(help: "Seconds sent first without being measured.") var warmup: Double = 2
    @Option(help: "Sessions the intents are spread over.") var sessions = 1000
    @Option(help: "Producer threads, each with its own connection.") var producers = 2
    @Option(help: "Measure every Nth session's batches (1: all).") var sample = 1
    @Option(help: "Write the report as JSON to this file.") var report: String?
    @Flag(
        help:
            "Step the rate up (x1.5 from --rate) until p99 exceeds --p99-bound or batches are lost; report the highest that held."
    )
    var findMax = false
    @Option(help: "The p99 latency bound for --find-max, in milliseconds.") var p99Bound: Double = 1
    @Flag(help: "Also measure a raw libzmq PUSH->PULL pipe with intent-sized messages, for comparison.")
    var baseline = false
    @Flag(
        help:
            "Also measure the CPU a raw libzmq relay (PULL -> XPUB, one thread; navload relay) takes per message at the run's rate: the floor under navigatord's CPU per intent. Each of its sockets is reached as navigatord's of the same kind is: over ipc when --intents (for PULL) or --commands (for XPUB) is an ipc:// endpoint, else over tcp loopback."
    )
    var floor = false
    @Flag(
        help:
            "With --floor: stop navigatord (SIGSTOP) while the floor is measured, and continue it after (also when navload is interrupted), so that its idle threads do not move the floor. navigatord answers nothing meanwhile: for benchmarks only."
    )
    var pauseService = false
    @Option(
        help:
            "With --floor: the relay spins this many microseconds on each message before publishing it, standing in for a service's own work per message, so the floor shows what the wake-ups cost once a message takes that long (0: the raw relay; at most 0.9 s of work a second at --rate)."
    )
    var floorWork: Double = 0
    @Flag(
        help:
            "With --floor: the relay publishes each message as navigatord publishes a batch — the topic, a 36-byte header and a 190-byte payload, three frames where the raw relay sends two — so that the floor holds libzmq's cost of the protocol's shape."
    )
    var floorBatches = false
    @Option(
        help:
            "navigatord's process id for CPU and RSS (default: the navigatord running here; of several, the one listening on --intents, or an error)."
    )
    var servicePid: Int32?
    @Option(
        help: ArgumentHelp(
            "Soak: sample navigatord's RSS and CPU every this many seconds, and report the RSS growth over the second half of the run.",
            valueName: "seconds"))
    var soak: Double?
    @Option(help: "Seed of the intent mix.") var seed: UInt64 = 1
    @Option(
        help:
            "Also follow this many HTTP streams (SSE) of the run's sessions (stream k: session load-k mod --sessions) and measure their delivery latency."
    )
    var streams = 0
    @Option(help: "navigatord's HTTP endpoint (host:port), for --streams.") var http = "127.0.0.1:7480"
    @Option(
        help: ArgumentHelp(
            "Acknowledge the batches of this share of the sessions (chosen by a stable hash of their ids) as their shells would, with an ack client event: navigatord's landing figures (navctl stats --routes) count them as landed.",
            valueName: "percent"))
    var ackShare: Double = 0
    @Option(
        help: ArgumentHelp(
            "Write each measured batch's due time (ms from the start of measurement) and latency (µs) to this file as CSV, to see when the slow ones came (at most 10,000,000 rows; with --find-max, the last run's).",
            valueName: "file"))
    var latencyLog: String?
    @Option(
        help: ArgumentHelp(
            "Secure mode: navigatord's public key, as 40 Z85 characters or a file holding them. [env: NAVIGATOR_SERVER_KEY]",
            valueName: "key"))
    var serverKey: String?
    @Option(
        help: ArgumentHelp(
            "Secure mode: this client's secret key file (navctl keygen); the key needs the admin role (navload reads stats and the route map, and follows every session). [env: NAVIGATOR_KEY_FILE]",
            valueName: "file"))
    var keyFile: String?

    func validate() throws {
        guard rate > 0, rate <= 10_000_000 else {
            throw ValidationError("--rate \(rate) is out of range; expected 0 < rate <= 10,000,000")
        }
        guard duration > 0, warmup >= 0 else { throw ValidationError("--duration must be > 0 and --warmup >= 0") }
        if let problem = RelayFloor.workProblem(workMicroseconds: floorWork, rate: rate) {
            throw ValidationError("--floor-work: \(problem)")
        }
        if floorBatches && !floor {
            throw ValidationError("--floor-batches sets how the floor's relay publishes; expected --floor with it")
        }
        if floorWork > 0 && !floor {
            throw ValidationError("--floor-work sets the floor's work per message; expected --floor with it")
        }
        if pauseService && !floor {
            throw ValidationError(
                "--pause-service pauses navigatord while the floor is measured; expected --floor with it")
        }
        if let soak, !(soak >= 0.5 && soak <= 3600) {
            throw ValidationError("--soak \(soak) is out of range; expected 0.5 to 3600 seconds between samples")
        }
        // Written after the run: a path that cannot be written is said before it.
        if let latencyLog, !FileManager.default.createFile(atPath: latencyLog, contents: nil) {
            throw ValidationError(
                "--latency-log \(latencyLog) cannot be created; expected a file in a directory navload can write to")
        }
        guard ackShare >= 0, ackShare <= 100 else {
            throw ValidationError("--ack-share \(ackShare) is out of range; expected 0 to 100 percent")
        }
        guard streams >= 0, streams <= 100_000 else {
            throw ValidationError("--streams \(streams) is out of range; expected 0 to 100,000")
        }
        guard sessions > 0, producers > 0, producers <= 64, sample > 0 else {
            throw ValidationError("--sessions, --producers (1 to 64) and --sample must be positive")
        }
    }

    func run() async throws {
        var plan = LoadPlan()
        let curve: CurveCredentials?
        do {
            curve = try CurveCredentials.fromOptions(serverKey: serverKey, keyFile: keyFile)
        } catch {
            FileHandle.standardError.write(Data("navload: \(error)\n".utf8))
            throw ExitCode(error.exitStatus)
        }
        plan.endpoints = ServerEndpoints(
            intents: intents.first ?? "tcp://127.0.0.1:7401", requests: requests, commands: commands, curve: curve)
        plan.intentEndpoints = intents
        plan.rate = rate
        plan.duration = duration
        plan.warmup = warmup
        plan.sessions = sessions
        plan.producers = producers
        plan.sample = sample
        plan.timeout = timeout
        plan.servicePID = servicePid
        plan.soakInterval = soak
        plan.seed = seed
        plan.streams = streams
        plan.http = http
        plan.ackShare = ackShare
        plan.latencyLog = latencyLog
        // Found before the run, so that a run that cannot pause navigatord fails at once.
        var pausePIDs: [Int32] = []
        if pauseService {
            guard let pids = try? ServicePause.processes(plan) else {
                let error = ClientError(
                    .invalidArgument,
                    "--pause-service: no navigatord listening on \(plan.endpoints.intents) on this machine; expected one here, or --service-pid"
                )
                FileHandle.standardError.write(Data("navload: \(error)\n".utf8))
                throw ExitCode(error.exitStatus)
            }
            pausePIDs = pids
        }
        do {
            var output: [String: String] = [:]
            var last: LoadReport?
            if findMax {
                let bound = UInt64(p99Bound * 1000)
                let result = try await FindMax.run(plan, p99Bound: bound) { step in
                    print(
                        "step \(Int(step.targetRate))/s: achieved \(Int(step.achievedRate))/s, p99 \(step.latency.p99) µs, lost \(step.batchesLost) -> \(FindMax.passed(step, p99Bound: bound) ? "held" : "did not hold")"
                    )
                }
                if let best = result.best {
                    print(
                        "highest sustainable rate: \(Int(best.achievedRate)) intents/s (p99 \(best.latency.p99) µs <= \(bound) µs, no loss)"
                    )
                    printTable(best)
                } else {
                    print(
                        "no rate held: the first step (\(Int(rate))/s) already exceeded p99 \(bound) µs or lost batches"
                    )
                }
                output["findMax"] = try json(result.steps)
                last = result.best ?? result.steps.last
            } else {
                let report = try await LoadRunner.run(
                    plan,
                    progress: { progress in
                        print(
                            "  \(String(format: "%5.1f", progress.elapsed)) s  sent \(progress.sent)  \(Int(progress.rate))/s  p50 \(progress.latency.p50) µs  p99 \(progress.latency.p99) µs  lost \(progress.lost)  rejected \(progress.rejected)  send errors \(progress.sendErrors)"
                        )
                    },
                    soakProgress: { sample in
                        print(
                            "  soak \(String(format: "%6.1f", sample.seconds)) s  navigatord RSS \(sample.rssBytes / 1_048_576) MiB  CPU \(String(format: "%.2f", sample.cpu)) cores"
                        )
                    })
                printTable(report)
                output["run"] = try json(report)
                last = report
            }
            if baseline {
                let size = max(16, last?.meanIntentBytes ?? 64)
                let rate = try await Baseline.measure(messageSize: size, seconds: 3)
                print("baseline: raw PUSH->PULL over tcp loopback, \(size)-byte messages: \(Int(rate)) messages/s")
                if let served = last?.serviceRate {
                    print(
                        "service throughput / baseline: \(String(format: "%.2f%%", 100 * served / rate)) (\(Int(served)) / \(Int(rate)))"
                    )
                }
                output["baselineMessagesPerSecond"] = String(Int(rate))
                output["baselineMessageBytes"] = String(size)
            }
            if floor {
                let rate = last?.achievedRate ?? plan.rate
                let size = max(16, last?.meanIntentBytes ?? 64)
                let measure = {
                    try await RelayFloor.measure(
                        executable: "/proc/self/exe", rate: rate, messageBytes: size, seconds: min(plan.duration, 10),
                        workNanoseconds: Int64((floorWork * 1000).rounded()), batches: floorBatches,
                        pull: .init(of: intents.first ?? ""), xpub: .init(of: commands))
                }
                let result: RelayFloor.Result
                if pauseService {
                    result = try await ServicePause.whilePaused(pausePIDs, measure)
                    print(
                        "floor: measured with navigatord paused (pid \(pausePIDs.map(String.init).joined(separator: ", ")))"
                    )
                } else {
                    result = try await measure()
                }
                var relay =
                    floorWork > 0
                    ? "libzmq relay spinning \(floorWork) µs on each message (--floor-work)"
                    : "raw libzmq relay"
                if floorBatches {
                    relay +=
                        " publishing batches (--floor-batches: \(result.frames) frames, the last \(result.lastFrameBytes) bytes)"
                }
                print(
                    "floor: \(relay) (PULL -> XPUB, one thread, \(Self.transports(intents.first ?? "", commands))) at \(Int(rate)) messages/s, \(size)-byte messages: \(String(format: "%.1f", result.microsecondsPerMessage)) µs CPU per message (\(String(format: "%.2f", result.cores)) cores)"
                )
                print(
                    "floor latency: p50 \(result.latency.p50) µs  p90 \(result.latency.p90) µs  p99 \(result.latency.p99) µs  max \(result.latency.max) µs"
                )
                if let perIntent = last?.cpuMicrosecondsPerIntent {
                    print(
                        "navigatord CPU per intent / floor: \(String(format: "%.2f", perIntent / result.microsecondsPerMessage)) (\(String(format: "%.1f", perIntent)) / \(String(format: "%.1f", result.microsecondsPerMessage)) µs)"
                    )
                } else {
                    print("navigatord CPU per intent / floor: unknown (navigatord's CPU per intent is)")
                }
                if let p99 = last?.latency.p99, result.latency.p99 > 0 {
                    print(
                        "p99 / floor p99: \(String(format: "%.2f", Double(p99) / Double(result.latency.p99))) (\(p99) / \(result.latency.p99) µs)"
                    )
                }
                output["floor"] = try json(result)
            }
            if let report {
                let text =
                    "{" + output.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ")
                    + "}\n"
                try text.write(toFile: report, atomically: true, encoding: .utf8)
                print("report written to \(report)")
            }
        } catch let error as ClientError {
            FileHandle.standardError.write(Data("navload: \(error)\n".utf8))
            throw ExitCode(error.exitStatus)
        }
    }

    func printTable(_ report: LoadReport) {
        var rows: [(String, String)] =
            [
                ("target rate", "\(Int(report.targetRate)) intents/s"),
                (
                    "achieved rate",
                    "\(Int(report.achievedRate)) intents/s (\(report.sent) sent, \(report.lateSends) late by > 1 ms)"
                ),
                ("latency p50 / p90 / p99", "\(report.latency.p50) / \(report.latency.p90) / \(report.latency.p99) µs"),
                (
                    "latency p99.9 / max",
                    "\(report.latency.p999) / \(report.latency.max) µs (\(report.batchesMeasured) batches measured)"
                ),
                ("batches lost", "\(report.batchesLost)"),
                (
                    "outcomes",
                    "resolved \(report.resolved), refreshed \(report.refreshed), ignored \(report.ignored), parked \(report.parked), rejected \(report.rejected) (released later \(report.released))"
                ),
                ("accounted", "\(report.accounted) of \(report.sent) sent"),
                (
                    "service throughput",
                    report.serviceRate.map { "\(Int($0)) intents/s (sent, resolved and accounted)" }
                        ?? "unknown (not all accounted for within --timeout)"
                ),
                (
                    "navigatord CPU",
                    report.serviceCPU.map { String(format: "%.2f cores", $0) } ?? "unknown (not found on this machine)"
                ),
                (
                    "navigatord CPU per intent",
                    report.cpuMicrosecondsPerIntent.map { String(format: "%.1f µs", $0) } ?? Self.cpuUnknown(report)
                ),
                ("navigatord RSS", report.serviceRSSBytes.map { "\($0 / 1_048_576) MiB" } ?? "unknown"),
                ("navigatord instances", report.instances == 1 ? "1" : "\(report.instances) (figures added up)"),
                ("navload CPU", report.loadCPU.map { String(format: "%.2f cores (same machine)", $0) } ?? "unknown"),
            ]
        if ackShare > 0 || report.landed > 0 {
            rows.append(
                (
                    "acknowledged",
                    "\(report.acknowledged) batches as shells (\(ackShare) % of sessions); \(report.acknowledgementsFailed) acknowledgements failed or unanswered"
                ))
            func bound(_ q: Double) -> String {
                guard let seconds = report.landQuantile(q) else { return "—" }
                if seconds == .infinity {
                    return "> \(report.landBounds.last.map { String(format: "%g s", $0) } ?? "?")"
                }
                return seconds < 1 ? String(format: "≤ %g ms", seconds * 1000) : String(format: "≤ %g s", seconds)
            }
            let shown = report.resolved + report.refreshed + report.ignored
            rows.append(
                (
                    "landed (navigatord)",
                    "\(report.landed) intents (acknowledged within the landing window, or already shown)"
                        + (shown > 0
                            ? String(
                                format: " = %.1f %% of those resolved, refreshed or ignored",
                                Double(report.landed) * 100 / Double(shown)) : "")
                        + "; time to land p50 \(bound(0.5)), p99 \(bound(0.99))"
                ))
        }
        if report.streams > 0, let latency = report.streamLatency {
            rows.append(
                (
                    "HTTP streams",
                    "\(report.streams) streams: \(report.streamBatches) batches delivered, \(report.streamBatchesMeasured) measured"
                ))
            rows.append(
                (
                    "streams latency p50 / p90 / p99",
                    "\(latency.p50) / \(latency.p90) / \(latency.p99) µs (max \(latency.max))"
                ))
            rows.append(
                (
                    "navigatord CPU per stream batch",
                    report.cpuMicrosecondsPerStreamBatch.map {
                        String(format: "%.1f µs (all its CPU over the batches streamed)", $0)
                    } ?? Self.cpuUnknown(report)
                ))
        }
        if !report.samples.isEmpty {
            let growth = report.rssGrowthSecondHalf.map {
                String(format: "%+.1f %% (%d samples)", $0 * 100, report.samples.count)
            }
            rows.append(("soak: RSS growth, 2nd half", growth ?? "too few samples"))
            if let quarter = report.rssGrowthLastQuarter, let last = report.samples.last {
                rows.append(("soak: RSS growth, last quarter", String(format: "%+.1f %%", quarter * 100)))
                rows.append(
                    (
                        "soak: RSS at the end",
                        "\(last.rssBytes / 1_048_576) MiB: \(Int(last.rssBytes) / max(sessions, 1)) bytes for each of the \(sessions) sessions of --sessions (the whole RSS, an empty navigatord's included)"
                    ))
            }
        }
        let width = rows.map(\.0.count).max() ?? 0
        for (name, value) in rows { print(name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value) }
    }

    /// How the floor's relay is reached, for its line: "tcp loopback", "ipc", or each socket's
    /// when they differ.
    static func transports(_ intents: String, _ commands: String) -> String {
        let (pull, xpub) = (RelayFloor.Transport(of: intents), RelayFloor.Transport(of: commands))
        func name(_ transport: RelayFloor.Transport) -> String { transport == .tcp ? "tcp loopback" : "ipc" }
        return pull == xpub ? name(pull) : "PULL over \(name(pull)), XPUB over \(name(xpub))"
    }

    /// What a CPU figure says when it cannot be given: why, when navigatord had not accounted
    /// for every intent as its CPU was read.
    static func cpuUnknown(_ report: LoadReport) -> String {
        report.serviceCPUSeconds != nil && report.serviceRate == nil
            ? "unknown (not all intents were accounted for within --timeout: a backlog still draining takes a longer --timeout)"
            : "unknown"
    }

    func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
