#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads small text files without Foundation, with errors that say which file and why.
public enum TextFile {
    public struct ReadError: Error, CustomStringConvertible, Sendable {
        /// The file's path and what went wrong: `cannot open /x.yaml: No such file or directory`.
        public var description: String
        /// What went wrong, without the path (for messages that name the file already).
        public var reason: String
    }

    public static func read(_ path: String) throws(ReadError) -> String {
        guard let file = fopen(path, "rb") else {
            let why = String(cString: strerror(errno))
            throw ReadError(description: "cannot open \(path): \(why)", reason: "cannot open it: \(why)")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count > 0 { bytes += buffer[0..<count] }
            if count < buffer.count {
                if ferror(file) != 0 {
                    let why = String(cString: strerror(errno))
                    throw ReadError(description: "cannot read \(path): \(why)", reason: "cannot read it: \(why)")
                }
                break
            }
            if bytes.count > 16 * 1024 * 1024 {
                throw ReadError(
                    description: "\(path) is over 16 MiB; expected a route map",
                    reason: "it is over 16 MiB; expected a route map")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ReadError(description: "\(path) is not valid UTF-8 text", reason: "it is not valid UTF-8 text")
        }
        return text
    }
}
