import CLibPQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One connection to a PostgreSQL server through libpq, PostgreSQL's own client library: blocking
/// calls, made from navigatord's own threads (the flush thread, the lease thread), never from
/// Swift concurrency's pool.
///
/// Every libpq call of the package is in this file. Parameters and results travel in binary
/// format, so bytes (`bytea`) need no escaping and integers no parsing. A connection is used by
/// one thread at a time: its owner keeps it behind a lock.
public final class PostgresConnection: @unchecked Sendable {
    // @unchecked: libpq's connection object is used by one thread at a time (documented above);
    // `handle` is only read after `init`.
    private let handle: OpaquePointer

    /// Where the connection goes, for messages: the URL without its password.
    public let redactedURL: String

    /// Connects to `url` (`postgresql://user[:password]@host[:port]/database[?parameters]`, as
    /// libpq reads it). A server that does not answer within `connectTimeoutSeconds` is an
    /// error; so is a connection on which the server has not acknowledged data for
    /// `tcpUserTimeoutMilliseconds` (a vanished server or network), instead of waiting forever.
    public init(
        url: String, applicationName: String = "navigatord", connectTimeoutSeconds: Int = 10,
        tcpUserTimeoutMilliseconds: Int = 10_000
    ) throws(PostgresError) {
        redactedURL = Self.redact(url)
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
            throw PostgresError(
                "\(redactedURL) is not a PostgreSQL URL; expected postgresql://user[:password]@host[:port]/database")
        }
        let settings: [(String, String)] = [
            ("dbname", url),  // expanded: the URL's own settings come first, the ones below add to them
            ("application_name", applicationName),
            ("connect_timeout", "\(connectTimeoutSeconds)"),
            ("tcp_user_timeout", "\(tcpUserTimeoutMilliseconds)"),
            ("keepalives", "1"),
            ("keepalives_idle", "5"),
            ("keepalives_interval", "2"),
            ("keepalives_count", "3"),
        ]
        let connection = Self.withCStrings(settings.map(\.0)) { keywords in
            Self.withCStrings(settings.map(\.1)) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else { throw PostgresError("out of memory connecting to \(redactedURL)") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.text(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError("cannot connect to \(redactedURL): \(message)", connectionLost: true)
        }
        // The server's notices (`relation … already exists, skipping`) are not errors: libpq
        // would print them on stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
    }

    deinit { PQfinish(handle) }

    /// Whether the connection is still usable (false after the server or the network went away).
    public var isOpen: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Runs one statement with `parameters` as `$1`, `$2`…; returns its rows (empty for a
    /// statement that returns none) and how many rows it changed.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresRows {
        let encoded = parameters.map { $0.encoded() }
        let result: OpaquePointer? = Self.withParameters(encoded) { types, values, lengths, formats in
            PQexecParams(handle, sql, Int32(encoded.count), types, values, lengths, formats, 1)
        }
        guard let result else {
            throw PostgresError(Self.text(PQerrorMessage(handle)), connectionLost: !isOpen)
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return Self.rows(of: result)
        default:
            throw Self.error(of: result, connection: handle)
        }
    }

    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws (and the
    /// error rethrown). With an `idleLimit`, the server ends the transaction — and the
    /// connection — once it waits that long for its next statement
    /// (`idle_in_transaction_session_timeout`, set for this transaction only, so it holds behind
    /// a pooler too): a transaction holding locks cannot outlast a process that froze in it.
    public func transaction<R>(idleLimit: Duration? = nil, _ body: () throws -> R) throws -> R {
        try execute("BEGIN")
        do {
            if let idleLimit {
                let milliseconds =
                    idleLimit.components.seconds * 1000 + idleLimit.components.attoseconds / 1_000_000_000_000_000
                try execute(
                    "SELECT set_config('idle_in_transaction_session_timeout', $1, true)",
                    [.text("\(max(1, milliseconds))")])
            }
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if isOpen { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    // MARK: Results

    private static func rows(of result: OpaquePointer) -> PostgresRows {
        let count = Int(PQntuples(result))
        let columns = Int(PQnfields(result))
        var cells: [PostgresCell] = []
        cells.reserveCapacity(count * columns)
        for row in 0..<Int32(count) {
            for column in 0..<Int32(columns) {
                if PQgetisnull(result, row, column) == 1 {
                    cells.append(PostgresCell(bytes: nil))
                } else {
                    let length = Int(PQgetlength(result, row, column))
                    let pointer = UnsafeRawPointer(PQgetvalue(result, row, column)!)
                    cells.append(PostgresCell(bytes: [UInt8](UnsafeRawBufferPointer(start: pointer, count: length))))
                }
            }
        }
        let changed = Int(text(PQcmdTuples(result))) ?? 0
        return PostgresRows(columns: columns, cells: cells, changed: changed)
    }

    private static func error(of result: OpaquePointer, connection: OpaquePointer) -> PostgresError {
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        var message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        if message == nil || message!.isEmpty { message = text(PQresultErrorMessage(result)) }
        if message!.isEmpty { message = text(PQerrorMessage(connection)) }
        return PostgresError(
            message!, sqlState: state, connectionLost: PQstatus(connection) != CONNECTION_OK)
    }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        var text = String(cString: pointer)
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return text
    }

    // MARK: C strings and parameters

    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        defer { for pointer in pointers { free(pointer) } }
        pointers.append(nil)
        return body(pointers.map { UnsafePointer($0) })
    }

    private static func withParameters<R>(
        _ parameters: [(type: UInt32, bytes: [UInt8]?)],
        _ body: (
            UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?
        ) -> R
    ) -> R {
        let types = parameters.map { Oid($0.type) }
        let lengths = parameters.map { Int32($0.bytes?.count ?? 0) }
        let formats = [Int32](repeating: 1, count: parameters.count)
        // One buffer for every value: libpq reads them during the call only.
        let total = parameters.reduce(0) { $0 + ($1.bytes?.count ?? 0) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 8)
        defer { buffer.deallocate() }
        var values: [UnsafePointer<CChar>?] = []
        values.reserveCapacity(parameters.count)
        var offset = 0
        for parameter in parameters {
            guard let bytes = parameter.bytes else {
                values.append(nil)
                continue
            }
            let start = buffer.baseAddress! + offset
            bytes.withUnsafeBytes { source in
                if !source.isEmpty { start.copyMemory(from: source.baseAddress!, byteCount: source.count) }
            }
            values.append(UnsafePointer(start.assumingMemoryBound(to: CChar.self)))
            offset += bytes.count
        }
        return types.withUnsafeBufferPointer { types in
            values.withUnsafeBufferPointer { values in
                lengths.withUnsafeBufferPointer { lengths in
                    formats.withUnsafeBufferPointer { formats in
                        body(types.baseAddress, values.baseAddress, lengths.baseAddress, formats.baseAddress)
                    }
                }
            }
        }
    }

    /// `url` without its password (`postgresql://user:***@host/db`), for logs and messages.
    public static func redact(_ url: String) -> String {
        guard let scheme = url.firstRange(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else {
            return url
        }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }
}

/// A value sent as a statement's parameter, in PostgreSQL's binary format.
public enum PostgresValue: Sendable, Hashable {
    case int64(Int64)
    case int32(Int32)
    case text(String)
    case bytes([UInt8])
    case bool(Bool)
    /// A `text[]`, `bigint[]`, `integer[]` or `bytea[]` (for `unnest`: many rows in one statement).
    case textArray([String])
    case int64Array([Int64])
    case int32Array([Int32])
    case bytesArray([[UInt8]])
    case null

    // Type oids (pg_type.h).
    static let boolOID: UInt32 = 16
    static let byteaOID: UInt32 = 17
    static let int8OID: UInt32 = 20
    static let int4OID: UInt32 = 23
    static let textOID: UInt32 = 25
    static let textArrayOID: UInt32 = 1009
    static let int8ArrayOID: UInt32 = 1016
    static let int4ArrayOID: UInt32 = 1007
    static let byteaArrayOID: UInt32 = 1001

    func encoded() -> (type: UInt32, bytes: [UInt8]?) {
        switch self {
        case .int64(let value): (Self.int8OID, Self.bigEndian(value))
        case .int32(let value): (Self.int4OID, Self.bigEndian(value))
        case .text(let value): (Self.textOID, Array(value.utf8))
        case .bytes(let value): (Self.byteaOID, value)
        case .bool(let value): (Self.boolOID, [value ? 1 : 0])
        case .textArray(let values): (Self.textArrayOID, Self.array(Self.textOID, values.map { Array($0.utf8) }))
        case .int64Array(let values): (Self.int8ArrayOID, Self.array(Self.int8OID, values.map(Self.bigEndian)))
        case .int32Array(let values): (Self.int4ArrayOID, Self.array(Self.int4OID, values.map(Self.bigEndian)))
        case .bytesArray(let values): (Self.byteaArrayOID, Self.array(Self.byteaOID, values))
        case .null: (0, nil)
        }
    }

    static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    /// A one-dimensional array without nulls in binary format: dimensions, a has-nulls flag, the
    /// element type, the length and lower bound, then each element's length and bytes.
    static func array(_ elementType: UInt32, _ elements: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + elements.reduce(0) { $0 + 4 + $1.count })
        bytes += bigEndian(Int32(elements.isEmpty ? 0 : 1))
        bytes += bigEndian(Int32(0))
        bytes += bigEndian(elementType)
        if !elements.isEmpty {
            bytes += bigEndian(Int32(elements.count))
            bytes += bigEndian(Int32(1))
        }
        for element in elements {
            bytes += bigEndian(Int32(element.count))
            bytes += element
        }
        return bytes
    }
}

/// The rows a statement returned, cells in binary format.
public struct PostgresRows: Sendable {
    public let columns: Int
    let cells: [PostgresCell]
    /// Rows inserted, updated or deleted (from the command tag); 0 for other statements.
    public let changed: Int

    public var count: Int { columns == 0 ? 0 : cells.count / columns }
    public var isEmpty: Bool { count == 0 }

    public subscript(row: Int, column: Int) -> PostgresCell { cells[row * columns + column] }
}

/// One value of a result, as the server sent it in binary format; the accessors say what type
/// the caller expects and throw if the bytes do not fit it.
public struct PostgresCell: Sendable {
    public let bytes: [UInt8]?

    public var isNull: Bool { bytes == nil }

    public func int64() throws(PostgresError) -> Int64 { try integer(Int64.self, "bigint") }
    public func int32() throws(PostgresError) -> Int32 { try integer(Int32.self, "integer") }

    public func text() throws(PostgresError) -> String {
        guard let bytes else { throw PostgresError("expected text, got NULL") }
        return String(decoding: bytes, as: UTF8.self)
    }

    public func data() throws(PostgresError) -> [UInt8] {
        guard let bytes else { throw PostgresError("expected bytea, got NULL") }
        return bytes
    }

    public func bool() throws(PostgresError) -> Bool {
        guard let bytes, bytes.count == 1 else { throw PostgresError("expected a boolean") }
        return bytes[0] != 0
    }

    private func integer<T: FixedWidthInteger>(_ type: T.Type, _ name: String) throws(PostgresError) -> T {
        guard let bytes else { throw PostgresError("expected \(name), got NULL") }
        guard bytes.count == MemoryLayout<T>.size else {
            throw PostgresError("expected \(name) (\(MemoryLayout<T>.size) bytes), got \(bytes.count) bytes")
        }
        return bytes.reduce(T(0)) { $0 << 8 | T($1) }
    }
}

/// What went wrong talking to PostgreSQL: the server's message and SQLSTATE code, or the
/// client's.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public let message: String
    /// The server's five-character SQLSTATE (`40001`, `23505`…), if the server sent one.
    public let sqlState: String?
    /// Whether the connection is unusable now (the server or the network went away): a new one
    /// is needed.
    public let connectionLost: Bool

    public init(_ message: String, sqlState: String? = nil, connectionLost: Bool = false) {
        self.message = message
        self.sqlState = sqlState
        self.connectionLost = connectionLost
    }

    public var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }
}
