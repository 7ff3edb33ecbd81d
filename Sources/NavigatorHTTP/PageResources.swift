import Foundation

/// The live session page's files (plain HTML, CSS and JavaScript modules from the package's
/// resources, no build step), read once at start. SwiftPM copies them into
/// `Navigator_NavigatorHTTP.resources/page` beside the executable; a checkout's source
/// directory serves when they are not there (`swift run` from elsewhere). Bundle.module is not
/// used: it stops the process when the bundle is missing.
struct PageResources: Sendable {
    /// File name -> (content type, bytes).
    let files: [String: (type: String, bytes: [UInt8])]
    /// Where they were read from, or where they were looked for.
    let location: String

    static let bundleName = "Navigator_NavigatorHTTP.resources"

    init() {
        var candidates: [URL] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(
                executable.deletingLastPathComponent().appendingPathComponent(Self.bundleName)
                    .appendingPathComponent("page"))
        }
        candidates.append(
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Resources/page"))
        for directory in candidates {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { continue }
            var files: [String: (type: String, bytes: [UInt8])] = [:]
            for name in names {
                guard let type = Self.contentType(of: name),
                    let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
                else { continue }
                files[name] = (type, Array(data))
            }
            if files["index.html"] != nil {
                self.files = files
                self.location = directory.path
                return
            }
        }
        files = [:]
        location = candidates.map(\.path).joined(separator: ", ")
    }

    static func contentType(of name: String) -> String? {
        if name.hasSuffix(".html") { return "text/html; charset=utf-8" }
        if name.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
        if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
        return nil
    }

    /// The file's reply, or a 404 naming what there is.
    func reply(_ name: String) -> HTTPReply {
        if let file = files[name] { return HTTPReply(200, file.type, file.bytes) }
        if files.isEmpty {
            return HTTPReply(
                503, "the page's files were not found (looked in \(location)); install them beside navigatord\n")
        }
        return HTTPReply(404, "no page file \(name); there are \(files.keys.sorted().joined(separator: ", "))\n")
    }
}
