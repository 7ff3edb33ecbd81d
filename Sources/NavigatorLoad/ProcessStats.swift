import NavigatorClient

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time and resident memory of a process on the same machine, from /proc.
struct ProcessStats {
    let pid: Int32

    /// The processes whose command name is `name` (zombies left out).
    static func all(named name: String) -> [Int32] {
        guard let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var found: [Int32] = []
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
            found.append(pid)
        }
        return found.sorted()
    }

    /// The navigatord under test: the only one running, or the one of several that listens on
    /// `endpoint` (a tcp port or an ipc path, found through /proc/net and each one's
    /// descriptors). Throws when several run and none can be told for certain.
    static func service(listeningOn endpoint: String) throws(ClientError) -> Int32? {
        let candidates = all(named: "navigatord")
        guard candidates.count > 1 else { return candidates.first }
        let inodes = listeningSockets(endpoint)
        let owners = candidates.filter { pid in
            guard let fds = opendir("/proc/\(pid)/fd") else { return false }
            defer { closedir(fds) }
            while let entry = readdir(fds) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                var target = [CChar](repeating: 0, count: 256)
                let count = readlink("/proc/\(pid)/fd/\(name)", &target, target.count - 1)
                guard count > 0 else { continue }
                let link = String(decoding: target.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if link.hasPrefix("socket:["), let inode = UInt64(link.dropFirst(8).dropLast()), inodes.contains(inode)
                {
                    return true
                }
            }
            return false
        }
        guard owners.count == 1 else {
            throw ClientError(
                .invalidArgument,
                "\(candidates.count) navigatord processes run (pids \(candidates.map(String.init).joined(separator: ", "))) and none can be told for certain to listen on \(endpoint); pass --service-pid"
            )
        }
        return owners[0]
    }

    /// Inodes of the sockets listening on a tcp port (any address) or bound to an ipc path.
    static func listeningSockets(_ endpoint: String) -> Set<UInt64> {
        var inodes: Set<UInt64> = []
        if endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":"),
            let port = Int(endpoint[endpoint.index(after: colon)...])
        {
            for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
                for line in (read(table) ?? "").split(separator: "\n").dropFirst() {
                    let fields = line.split(separator: " ")
                    // local_address is HEXIP:HEXPORT; state 0A is LISTEN; the inode is field 10.
                    guard fields.count > 9, fields[3] == "0A",
                        let local = fields[1].split(separator: ":").last, Int(local, radix: 16) == port,
                        let inode = UInt64(fields[9])
                    else { continue }
                    inodes.insert(inode)
                }
            }
        } else if endpoint.hasPrefix("ipc://") {
            let path = String(endpoint.dropFirst(6))
            for line in (read("/proc/net/unix") ?? "").split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                guard fields.count >= 8, fields.last.map(String.init) == path, let inode = UInt64(fields[6]) else {
                    continue
                }
                inodes.insert(inode)
            }
        }
        return inodes
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

/// Several processes measured as one: the instances of a cluster on this machine (CPU and
/// resident memory added up; unknown when any member's is).
struct ProcessGroup {
    let members: [ProcessStats]

    var cpuSeconds: Double? {
        var total = 0.0
        for member in members {
            guard let seconds = member.cpuSeconds else { return nil }
            total += seconds
        }
        return members.isEmpty ? nil : total
    }

    var residentBytes: UInt64? {
        var total: UInt64 = 0
        for member in members {
            guard let bytes = member.residentBytes else { return nil }
            total += bytes
        }
        return members.isEmpty ? nil : total
    }
}

extension String {
    fileprivate var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
