import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One navigatord per data directory: an exclusive `flock` on `navigatord.lock` in it, held while
/// the service lives and released by the kernel however the process ends (kill -9 included). The
/// file holds the holder's pid, so a second instance can say who has the directory.
public final class DataDirectoryLock: Sendable {
    public static let fileName = "navigatord.lock"
    public let path: String
    private let descriptor: Locked<Int32>

    /// Creates the directory if needed and takes the lock, or throws naming the directory and the
    /// pid that holds it.
    public init(directory: String) throws {
        try Self.makeDirectory(directory)
        path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw StoreError(.invalidSetting, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            let holder = Self.readPID(descriptor)
            close(descriptor)
            guard reason == EWOULDBLOCK else {
                throw StoreError(.invalidSetting, "cannot lock \(path): \(String(cString: strerror(reason)))")
            }
            throw StoreError(
                .locked,
                "the data directory \(directory) is in use by another navigatord\(holder.map { " (pid \($0))" } ?? ""); "
                    + "one navigatord per data directory: stop that one, or give this one another --data-directory")
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = Locked(descriptor)
    }

    /// Lets the directory go (also done when the process ends, however it ends).
    public func release() {
        descriptor.withLock {
            if $0 >= 0 { close($0) }
            $0 = -1
        }
    }

    deinit { release() }

    private static func readPID(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Creates the data directory and its parents (mode 0700) if missing; the error names the
    /// directory and the system's reason (`Permission denied`).
    public static func makeDirectory(_ directory: String) throws {
        var built = directory.hasPrefix("/") ? "" : "."
        for part in directory.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                let place = built == directory || "./" + directory == built ? "" : " (at \(built))"
                throw StoreError(
                    .invalidSetting,
                    "cannot create the data directory \(directory)\(place): \(String(cString: strerror(errno)))")
            }
        }
        var status = stat()
        guard stat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError(.invalidSetting, "the data directory \(directory) is not a directory")
        }
    }
}
