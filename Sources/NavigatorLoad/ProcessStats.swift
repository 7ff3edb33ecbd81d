#if canImport(Glibc)
    import Glibc
#endif

/// CPU time and resident memory of a process on the same machine, from /proc.
struct ProcessStats {
    let pid: Int32

    /// A process whose command name is `name`, if one runs.
    static func find(named name: String) -> Int32? {
        guard let directory = opendir("/proc") else { return nil }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = Int32(entryName) else { continue }
            guard read("/proc/\(pid)/comm")?.trimmingNewline == name else { continue }
            // A process that is exiting (zombie or dead) is not the one under test.
            if let stat = read("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")"),
                let state = stat[stat.index(after: close)...].split(separator: " ").first,
                state == "Z" || state == "X"
            {
                continue
            }
            return pid
        }
        return nil
    }

    /// User plus system CPU seconds so far.
    var cpuSeconds: Double? {
        guard let stat = Self.read("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3, utime 14, stime 15 (1-based in proc(5)).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    var residentBytes: UInt64? {
        guard let status = Self.read("/proc/\(pid)/status") else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let number = line.split(separator: " ").dropFirst().first.flatMap { UInt64($0) }
            return number.map { $0 * 1024 }
        }
        return nil
    }

    static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count > 0 { bytes += buffer[0..<count] }
            if count < buffer.count { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    fileprivate var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
