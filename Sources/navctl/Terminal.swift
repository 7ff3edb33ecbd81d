import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The controlling terminal in raw mode (keys arrive one by one, nothing echoes) on the
/// alternate screen; restored on every way out, signals included.
final class Terminal: Sendable {
    let isInteractive: Bool

    init() {
        isInteractive = isatty(0) != 0 && isatty(1) != 0
        guard isInteractive else { return }
        var original = termios()
        tcgetattr(0, &original)
        savedTerminal = original
        var raw = original
        cfmakeraw(&raw)
        raw.c_oflag |= tcflag_t(OPOST)  // keep "\n" -> "\r\n" for drawing
        tcsetattr(0, TCSAFLUSH, &raw)
        Self.write("\u{1B}[?1049h\u{1B}[?25l")  // alternate screen, cursor hidden
        for number in [SIGTERM, SIGHUP, SIGQUIT] {
            signal(number) { received in
                restoreTerminal()
                _exit(128 + received)
            }
        }
    }

    func restore() {
        guard isInteractive else { return }
        restoreTerminal()
    }

    /// Clears the screen and draws `lines`.
    func draw(_ lines: [String]) {
        if isInteractive {
            Terminal.write("\u{1B}[H\u{1B}[2J" + lines.joined(separator: "\n") + "\n")
        } else {
            Terminal.write(lines.joined(separator: "\n") + "\n---\n")
        }
    }

    static func write(_ text: String) {
        var copy = text
        copy.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(1, bytes.baseAddress! + offset, bytes.count - offset)
                if count <= 0 { return }
                offset += count
            }
        }
    }
}

/// The terminal settings to put back. Global because a signal handler can reach nothing else;
/// written once before any handler is installed, then only read.
nonisolated(unsafe) private var savedTerminal: termios?

private func restoreTerminal() {
    guard var original = savedTerminal else { return }
    tcsetattr(0, TCSAFLUSH, &original)
    Terminal.write("\u{1B}[?25h\u{1B}[?1049l")
}

/// Keys the shell understands.
enum Key: Sendable {
    case character(Character)
    case left, escape, backspace, interrupt, endOfInput
}

/// Reads keys from standard input on a thread of its own (a blocking read must not sit on the
/// cooperative pool).
enum KeyReader {
    static func start(_ yield: @escaping @Sendable (Key) -> Void) {
        let thread = DedicatedThread(name: "navctl-keys") {
            var buffer = [UInt8](repeating: 0, count: 32)
            while true {
                let count = read(0, &buffer, buffer.count)
                if count <= 0 {
                    yield(.endOfInput)
                    return
                }
                var index = 0
                while index < count {
                    let byte = buffer[index]
                    switch byte {
                    case 3: yield(.interrupt)
                    case 127, 8: yield(.backspace)
                    case 27:
                        if index + 2 < count, buffer[index + 1] == UInt8(ascii: "["),
                            buffer[index + 2] == UInt8(ascii: "D")
                        {
                            yield(.left)
                            index += 2
                        } else if index + 2 < count, buffer[index + 1] == UInt8(ascii: "[") {
                            index += 2  // another arrow or function key: ignored
                        } else {
                            yield(.escape)
                        }
                    default:
                        yield(.character(Character(UnicodeScalar(byte))))
                    }
                    index += 1
                }
            }
        }
        thread.detach()
    }
}
