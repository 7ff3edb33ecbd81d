import Testing
import ZeroMQ

@Suite("The process heap")
struct HeapTests {
    @Test("malloc's thresholds are held unless the environment sets them for glibc")
    func environmentSetsThresholds() {
        let sets: [[String: String]] = [
            ["MALLOC_TRIM_THRESHOLD_": "262144"],
            ["MALLOC_MMAP_THRESHOLD_": "0"],
            ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"],
            ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536"],
        ]
        for environment in sets { #expect(Heap.environmentSetsThresholds(environment), "\(environment)") }
        let leaves: [[String: String]] = [
            [:],
            ["PATH": "/usr/bin", "MALLOC_ARENA_MAX": "2"],
            ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"],
            ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold_x=1:x.glibc.malloc.mmap_threshold=1"],
            ["GLIBC_TUNABLES": ""],
            // No value: glibc passes over it, so the thresholds are still navigatord's to hold.
            ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold"],
            ["MALLOC_TRIM_THRESHOLD": "1"],
        ]
        for environment in leaves { #expect(!Heap.environmentSetsThresholds(environment), "\(environment)") }
    }
}
