// swift-tools-version: 6.1
import PackageDescription

// The targets and the one-way rule between them (DESIGN.md §1; docs/architecture.md): navigatord
// composes NavigatorEngine, NavigatorHTTP and NavigatorStore; NavigatorHTTP speaks only to the
// port the engine implements (NavigatorPort), never to ZeroMQ, the engine or the store;
// NavigatorEngine reaches the store through its protocol of rows. `./dev test` builds with
// `--explicit-target-dependency-import-check=error`, so an import the graph does not allow fails.
let package = Package(
    name: "Navigator",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "NavigatorCore", targets: ["NavigatorCore"]),
        .library(name: "NavigatorWire", targets: ["NavigatorWire"]),
        .library(name: "NavigatorClient", targets: ["NavigatorClient"]),
        .library(name: "NavigatorLoad", targets: ["NavigatorLoad"]),
        .library(name: "NavigatorMix", targets: ["NavigatorMix"]),
        .executable(name: "navigatord", targets: ["navigatord"]),
        .executable(name: "navctl", targets: ["navctl"]),
        .executable(name: "navload", targets: ["navload"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // navigatord's HTTP side: /metrics, /healthz, /readyz, the JSON API, streams and the page.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // Already under Hummingbird; named for the stream handlers that run in its NIO pipeline
        // (HTTP/1, WebSocket frames, and the HTTP types Hummingbird's channel speaks).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // Already under jwt-kit: SHA-1 for the WebSocket handshake done in the stream handler.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Bearer tokens (JWT) for HTTP in secure mode; navctl token issues them.
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // Spans of traced intents: the engine records them through swift-distributed-tracing's
        // Tracer; navigatord exports them with OpenTelemetry over OTLP/HTTP (no gRPC).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // libzmq from the system. Not located through pkg-config: Debian's libzmq.pc pulls in
        // krb5-gssapi's `-isystem` flags, which SwiftPM refuses with a warning on every build;
        // zmq.h is in /usr/include and the modulemap links libzmq itself.
        .systemLibrary(name: "CZeroMQ", providers: [.apt(["libzmq3-dev"])]),
        // The one lock type (Synchronization's Mutex; a pthread mutex ThreadSanitizer can see in
        // a build with -DNAVIGATOR_TSAN, ./dev tsan), and GiveWay: long background work offering
        // its core to the threads of the hot path (the write-behind, in the engine and the store).
        .target(name: "Locking"),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ", "Locking"]),
        // libpq, PostgreSQL's own client library, for the PostgreSQL store (several instances):
        // blocking calls that fit navigatord's own threads, nothing more to compile.
        .systemLibrary(name: "CLibPQ", providers: [.apt(["libpq-dev"])]),
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        .target(name: "NavigatorCore"),
        // Route maps (and service configuration) from YAML, with errors that give the line.
        .target(name: "NavigatorYAML", dependencies: ["NavigatorCore", "Yams"]),
        .target(
            name: "NavigatorWire",
            dependencies: ["NavigatorCore", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            exclude: ["Generated/README.md"]
        ),
        // What the edges may ask of the engine in process: send, ask, follow, as a caller.
        .target(name: "NavigatorPort", dependencies: ["NavigatorCore", "NavigatorWire"]),
        // The bearer tokens of HTTP in secure mode: their claims, signing and checking.
        .target(name: "NavigatorTokens", dependencies: [.product(name: "JWTKit", package: "jwt-kit")]),
        // Where sessions are kept: the SQLite state file, PostgreSQL and its partition leases, the
        // data-directory lock — rows of (session id, seq, bytes), nothing of the engine.
        .target(
            name: "NavigatorStore",
            dependencies: [
                // NavigatorWire for one migration of old state files (intent ids to hashes).
                "NavigatorCore", "NavigatorWire", "Postgres", "Locking", .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The loops, workers, the in-memory session store, write-behind, security, counters and
        // metrics; implements NavigatorPort.
        .target(
            name: "NavigatorEngine",
            dependencies: [
                "NavigatorCore", "NavigatorWire", "NavigatorYAML", "NavigatorPort", "NavigatorStore", "ZeroMQ", "Yams",
                "Locking",
                // Sessions another instance serves are followed through its sockets, as a shell.
                "NavigatorClient",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The HTTP application: health, metrics, the JSON API, session streams, the page.
        .target(
            name: "NavigatorHTTP",
            dependencies: [
                "NavigatorCore", "NavigatorWire", "NavigatorPort", "NavigatorTokens", "Locking",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // The live session page: plain HTML, CSS and JavaScript modules, served as they are.
            resources: [.copy("Resources/page")]
        ),
        // The client library for producers and shells.
        .target(
            name: "NavigatorClient",
            dependencies: [
                "NavigatorCore", "NavigatorWire", "ZeroMQ", "Locking",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The composition root: configuration, store, engine and HTTP in one service group.
        .executableTarget(
            name: "navigatord",
            dependencies: [
                "NavigatorEngine", "NavigatorHTTP", "NavigatorStore", "NavigatorPort", "NavigatorTokens",
                "NavigatorCore", "NavigatorYAML", "Yams", "ZeroMQ", "Locking",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ]
        ),
        .executableTarget(
            name: "navctl",
            dependencies: [
                "NavigatorClient", "NavigatorCore", "NavigatorWire", "NavigatorTokens", "NavigatorYAML", "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // navload's realistic mix of intents and client events on a route map, and the resolver
        // benchmark over it: pure (NavigatorCore only), so that the allocation benchmarks
        // (Benchmarks/, a release build in `./dev test`) build no sockets, YAML or client.
        .target(name: "NavigatorMix", dependencies: ["NavigatorCore"]),
        // The load generator behind navload: open-loop publishing, latency, reports.
        .target(
            name: "NavigatorLoad",
            dependencies: [
                "NavigatorClient", "NavigatorCore", "NavigatorMix", "NavigatorWire", "NavigatorYAML", "ZeroMQ",
                "Locking",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .executableTarget(
            name: "navload",
            dependencies: [
                "NavigatorClient", "NavigatorCore", "NavigatorLoad", "NavigatorMix",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // libFuzzer over decode + resolve + apply (scripts/fuzz-libfuzzer.sh builds it with
        // -sanitize=fuzzer); a normal build makes it a replayer of saved inputs.
        .executableTarget(
            name: "navfuzz",
            dependencies: [
                "NavigatorCore", "NavigatorWire", .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "Locking", "TestThreads"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "NavigatorTestSupport"]),
        // Runs a CPU-heavy test's work off Swift concurrency's pool (two threads here), where it
        // would hold up every other test's awaits.
        .target(name: "TestThreads", path: "Tests/TestThreads"),
        .testTarget(name: "NavigatorWireTests", dependencies: ["NavigatorWire", "NavigatorCore", "TestThreads"]),
        .testTarget(name: "NavigatorCoreTests", dependencies: ["NavigatorCore", "TestThreads"]),
        .testTarget(name: "NavigatorYAMLTests", dependencies: ["NavigatorYAML"]),
        // Helpers the test targets share: an in-process engine's configuration, a ZeroMQ test
        // client, HTTP, SSE and WebSocket clients on plain sockets, child processes, PostgreSQL.
        .target(
            name: "NavigatorTestSupport",
            dependencies: [
                "NavigatorEngine", "NavigatorClient", "NavigatorCore", "NavigatorWire", "Postgres", "ZeroMQ", "Locking",
                "TestThreads",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Tests/NavigatorTestSupport"
        ),
        .testTarget(
            name: "NavigatorLoadTests",
            dependencies: [
                "NavigatorTestSupport",
                "NavigatorLoad", "NavigatorClient", "NavigatorEngine", "NavigatorCore", "NavigatorMix", "ZeroMQ",
                "Locking", "TestThreads",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "NavigatorClientTests",
            dependencies: [
                "NavigatorTestSupport", "navctl",
                "NavigatorClient", "NavigatorEngine", "NavigatorCore", "NavigatorWire", "NavigatorMix", "ZeroMQ",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The semantic fuzzer: random steps through the resolver, store and state file.
        .testTarget(
            name: "NavigatorFuzzTests",
            dependencies: [
                "NavigatorTestSupport", "NavigatorEngine", "NavigatorStore", "NavigatorWire", "NavigatorCore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "NavigatorEngineTests",
            dependencies: [
                "NavigatorTestSupport",
                "NavigatorEngine", "NavigatorStore", "NavigatorPort", "NavigatorWire", "NavigatorCore",
                "NavigatorClient", "Postgres", "ZeroMQ", "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // navigatord as a whole: configuration, the HTTP API and streams against a real engine,
        // the executable.
        .testTarget(
            name: "NavigatordTests",
            dependencies: [
                "NavigatorTestSupport", "navigatord",
                "NavigatorEngine", "NavigatorHTTP", "NavigatorStore", "NavigatorPort", "NavigatorTokens",
                "NavigatorWire", "NavigatorCore", "NavigatorClient", "NavigatorLoad", "NavigatorYAML", "Postgres",
                "ZeroMQ",
                "Yams", "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
    ]
)

// `./dev tsan`: ThreadSanitizer on this package's own targets (NAVIGATOR_SANITIZE=thread), with the
// lock it can see (NAVIGATOR_TSAN: `Locked` as a pthread mutex). Not `swift build --sanitize`,
// which instruments every dependency too: swift-otel 1.6.0 does not compile under it (a Swift 6
// region error in its batch log processor that the same file does not have without the
// sanitizer). Uninstrumented dependencies are not checked; their pthread locks still are seen.
if Context.environment["NAVIGATOR_SANITIZE"] == "thread" {
    for target in package.targets where target.type != .system {
        target.swiftSettings =
            (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=thread"]), .define("NAVIGATOR_TSAN")]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=thread"])]
    }
}
