// swift-tools-version: 6.1
// A model of the resolver's commonest work on a tree of plain values, measured beside the
// resolver on the same intents in the same run, its outcomes, commands and trees checked against
// the resolver's first (issue 31; docs/plain-tree.md). Not part of the service and not built
// by `./dev test`: `scripts/plain-tree-model.sh`.
// A package of its own, so that building navigatord does not build it.
import PackageDescription

let package = Package(
    name: "PlainTree",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Navigator", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "PlainTree",
            dependencies: [
                .product(name: "NavigatorCore", package: "Navigator"),
                .product(name: "NavigatorMix", package: "Navigator"),
            ],
            path: "Sources/PlainTree"
        )
    ]
)
