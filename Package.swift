// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Navigator",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "NavigatorCore", targets: ["NavigatorCore"]),
        .library(name: "NavigatorWire", targets: ["NavigatorWire"]),
        .library(name: "NavigatorClient", targets: ["NavigatorClient"]),
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
        // Already under Hummingbird; named for the stream handler that runs in its NIO pipeline.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // Already under jwt-kit: SHA-1 for the WebSocket handshake done in the stream handler.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Bearer tokens (JWT) for HTTP in secure mode; navctl token issues them.
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
    ],
    targets: [
        // libzmq from the system. Not located through pkg-config: Debian's libzmq.pc pulls in
        // krb5-gssapi's `-isystem` flags, which SwiftPM refuses with a warning on every build;
        // zmq.h is in /usr/include and the modulemap links libzmq itself.
        .systemLibrary(name: "CZeroMQ", providers: [.apt(["libzmq3-dev"])]),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"]),
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
        .target(
            name: "NavigatorService",
            dependencies: [
                "NavigatorCore", "NavigatorWire", "NavigatorYAML", "ZeroMQ", "Postgres", "Yams",
                // The HTTP API reaches the service's own sockets as a client does.
                "NavigatorClient",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            // The live session page: plain HTML, CSS and JavaScript modules, served as they are.
            resources: [.copy("Resources/page")]
        ),
        .target(
            name: "NavigatorClient",
            dependencies: [
                "NavigatorCore", "NavigatorWire", "ZeroMQ", .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        .executableTarget(
            name: "navigatord",
            dependencies: [
                "NavigatorService", "NavigatorCore", "NavigatorYAML",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "navctl",
            dependencies: [
                "NavigatorClient", "ZeroMQ", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The load generator behind navload: open-loop publishing, latency, reports.
        .target(
            name: "NavigatorLoad",
            dependencies: [
                "NavigatorClient", "NavigatorCore", "NavigatorWire", "NavigatorYAML", "ZeroMQ",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .executableTarget(
            name: "navload",
            dependencies: [
                "NavigatorClient", "NavigatorCore", "NavigatorLoad",
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
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "NavigatorTestSupport"]),
        .testTarget(name: "NavigatorWireTests", dependencies: ["NavigatorWire", "NavigatorCore"]),
        .testTarget(name: "NavigatorCoreTests", dependencies: ["NavigatorCore"]),
        .testTarget(name: "NavigatorYAMLTests", dependencies: ["NavigatorYAML"]),
        // Helpers the test targets share (an in-process service's configuration, directories).
        .target(
            name: "NavigatorTestSupport",
            dependencies: [
                "NavigatorService", "NavigatorClient", "Postgres", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/NavigatorTestSupport"
        ),
        .testTarget(
            name: "NavigatorLoadTests",
            dependencies: [
                "NavigatorTestSupport",
                "NavigatorLoad", "NavigatorClient", "NavigatorService", "NavigatorCore", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "NavigatorClientTests",
            dependencies: [
                "NavigatorTestSupport",
                "NavigatorClient", "NavigatorService", "NavigatorCore", "NavigatorWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The semantic fuzzer: random steps through the resolver, store and state file.
        .testTarget(
            name: "NavigatorFuzzTests",
            dependencies: [
                "NavigatorTestSupport", "NavigatorService", "NavigatorWire", "NavigatorCore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "NavigatorServiceTests",
            dependencies: [
                "NavigatorTestSupport",
                "NavigatorService", "NavigatorWire", "NavigatorCore", "NavigatorClient", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
    ]
)
