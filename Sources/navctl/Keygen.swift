import ArgumentParser
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `navctl keygen NAME`: a CURVE key pair for navigatord's secure mode.
struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a CURVE key pair for secure mode: NAME.key (secret, mode 0600) and NAME.pub.",
        discussion: """
            For navigatord: pass NAME.key as --secret-key-file, and give clients NAME.pub (or \
            the key it holds) as their --server-key. For a client: add the printed public key \
            to navigatord's access file, and pass NAME.key as the client's --key-file. Existing \
            files are never overwritten.
            """)

    @Argument(help: "The key's name: the files are NAME.key and NAME.pub.")
    var name: String

    @Option(help: "Directory to write the files to (made, mode 0700, if missing).")
    var directory = "."

    func validate() throws {
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else {
            throw ValidationError("NAME \"\(name)\" must be a plain file name (no \"/\", not starting with \".\")")
        }
    }

    func run() throws {
        // A missing directory is made, readable by its owner only; its parent must exist.
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw ValidationError("cannot make the directory \(directory): \(String(cString: strerror(errno)))")
        }
        let keys = try CurveKeyPair.generate()
        let secretPath = "\(directory)/\(name).key"
        let publicPath = "\(directory)/\(name).pub"
        try write(keys.secretKey + "\n", to: secretPath, mode: 0o600)
        do {
            try write(keys.publicKey + "\n", to: publicPath, mode: 0o644)
        } catch {
            unlink(secretPath)
            throw error
        }
        print(
            """
            wrote \(secretPath) (secret key, mode 0600) and \(publicPath) (public key)
            public key: \(keys.publicKey)
            for navigatord's access file:
              - name: \(name)
                key: "\(keys.publicKey)"
                role: shell            # producer | shell | admin
                sessions: ["\(name)"]  # exact ids, or prefixes ending in *
            """)
    }

    /// Creates `path` exclusively with `mode` (the secret is never readable by others, not even
    /// for a moment) and writes `text`.
    private func write(_ text: String, to path: String, mode: mode_t) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard descriptor >= 0 else {
            let reason =
                errno == EEXIST ? "it exists already (keys are never overwritten)" : String(cString: strerror(errno))
            throw ValidationError("cannot write \(path): \(reason)")
        }
        defer { close(descriptor) }
        fchmod(descriptor, mode)  // whatever the umask
        let bytes = Array(text.utf8)
        guard Glibc.write(descriptor, bytes, bytes.count) == bytes.count else {
            throw ValidationError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
