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

    /// Clears the screen and draws `lines`, fitted to the terminal: long lines wrap at spaces
    /// (continued indented), and when there are more lines than rows the first ones (the header
    /// and the tree) and the last one (the keys) stay.
    func draw(_ lines: [String]) {
        if isInteractive {
            let (rows, columns) = Self.size()
            Terminal.write("\u{1B}[H\u{1B}[2J" + Self.fit(lines, rows: rows, columns: columns).joined(separator: "\n"))
        } else {
            Terminal.write(lines.joined(separator: "\n") + "\n---\n")
        }
    }

    /// The terminal's rows and columns (24 x 80 if it does not say).
    static func size() -> (rows: Int, columns: Int) {
        var size = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0, size.ws_col > 0 else { return (24, 80) }
        return (Int(size.ws_row), Int(size.ws_col))
    }

    /// `lines` in at most `rows` lines of at most `columns` visible characters.
    static func fit(_ lines: [String], rows: Int, columns: Int) -> [String] {
        var fitted = lines.flatMap { wrap($0, columns: max(columns, 20)) }
        if fitted.count > rows, rows >= 2 {
            fitted = Array(fitted.prefix(rows - 1)) + [fitted.last!]
        }
        return fitted
    }

    /// One line as lines of at most `columns` visible characters, broken at spaces (a word
    /// longer than a line is cut). Escape sequences (styles) take no room and are kept whole; a
    /// style open at a break is closed there and opened again on the next line.
    static func wrap(_ line: String, columns: Int) -> [String] {
        var tokens: [(text: String, visible: Int)] = []  // words, spaces and escape sequences
        var current = ""
        var visible = 0
        var escape = false
        func flush() {
            if !current.isEmpty { tokens.append((current, visible)) }
            current = ""
            visible = 0
        }
        for character in line {
            if escape {
                current.append(character)
                if character.isLetter {
                    escape = false
                    flush()
                }
                continue
            }
            if character == "\u{1B}" {
                flush()
                escape = true
                current.append(character)
                continue
            }
            if character == " " {
                flush()
                tokens.append((" ", 1))
                continue
            }
            current.append(character)
            visible += 1
        }
        flush()
        var result: [String] = []
        var out = ""
        var width = 0
        var style = ""  // the last escape sequence seen, reapplied after a break
        let indent = "  "
        for token in tokens {
            if token.visible == 0 {
                out += token.text
                style = token.text.hasSuffix("[0m") ? "" : token.text
                continue
            }
            if width + token.visible > columns, width > 0 {
                while out.hasSuffix(" ") { out.removeLast() }
                result.append(out + (style.isEmpty ? "" : "\u{1B}[0m"))
                out = indent + style
                width = indent.count
                if token.text == " " { continue }
            }
            var text = token.text
            while width + text.count > columns {
                let room = max(1, columns - width)
                out += String(text.prefix(room))
                result.append(out + (style.isEmpty ? "" : "\u{1B}[0m"))
                text = String(text.dropFirst(room))
                out = indent + style
                width = indent.count
            }
            out += text
            width += text.count
        }
        result.append(out)
        return result
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

/// SIGWINCH, delivered as a call of `yield` on a thread of its own (a signal handler can only
/// write to a pipe).
enum ResizeWatcher {
    static func start(_ yield: @escaping @Sendable () -> Void) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return }
        resizePipe = ends[1]
        signal(SIGWINCH) { _ in
            var byte: UInt8 = 1
            _ = write(resizePipe, &byte, 1)
        }
        let reader = ends[0]
        DedicatedThread(name: "navctl-resize") {
            var byte: UInt8 = 0
            while read(reader, &byte, 1) == 1 { yield() }
        }.detach()
    }
}

/// The write end of the resize pipe, for the signal handler; set once before it is installed.
nonisolated(unsafe) private var resizePipe: Int32 = -1

/// Styles for a terminal: colour only when standard output is a terminal and NO_COLOR is unset
/// (https://no-color.org); reverse video marks the top screen on any terminal.
struct Palette: Sendable {
    let colour: Bool
    let terminal: Bool

    init() {
        terminal = isatty(1) != 0
        colour = terminal && getenv("NO_COLOR").map { String(cString: $0).isEmpty } ?? true
    }

    func red(_ text: String) -> String { colour ? "\u{1B}[31m\(text)\u{1B}[0m" : text }
    func green(_ text: String) -> String { colour ? "\u{1B}[32m\(text)\u{1B}[0m" : text }
    func yellow(_ text: String) -> String { colour ? "\u{1B}[33m\(text)\u{1B}[0m" : text }
    func dim(_ text: String) -> String { colour ? "\u{1B}[2m\(text)\u{1B}[0m" : text }
    func top(_ text: String) -> String { terminal ? "\u{1B}[7m\(text)\u{1B}[0m" : "[\(text)]" }
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
