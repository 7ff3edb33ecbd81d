import NavigatorTestSupport
import Postgres
import Testing

@Suite("PostgreSQL connection (libpq)", .enabled(if: TestPostgres.enabled))
struct PostgresConnectionTests {
    @Test("values go and come back in binary format")
    func roundTrip() async throws {
        try await TestPostgres.withDatabase { url in
            let connection = try PostgresConnection(url: url)
            let bytes: [UInt8] = [0, 1, 2, 255, 0, 39, 92]
            let rows = try connection.execute(
                "SELECT $1::bigint, $2::integer, $3::text, $4::bytea, $5::boolean, $6::text",
                [.int64(-(1 << 40) - 3), .int32(-7), .text("chat ✓ 'quoted'"), .bytes(bytes), .bool(true), .null])
            #expect(rows.count == 1)
            #expect(try rows[0, 0].int64() == -(1 << 40) - 3)
            #expect(try rows[0, 1].int32() == -7)
            #expect(try rows[0, 2].text() == "chat ✓ 'quoted'")
            #expect(try rows[0, 3].data() == bytes)
            #expect(try rows[0, 4].bool())
            #expect(rows[0, 5].isNull)
        }
    }

    @Test("arrays insert many rows in one statement (unnest), empty arrays too")
    func arrays() async throws {
        try await TestPostgres.withDatabase { url in
            let connection = try PostgresConnection(url: url)
            try connection.execute("CREATE TABLE t (id text PRIMARY KEY, n bigint, p integer, b bytea)")
            let ids = (0..<500).map { "s\($0)" }
            let insert = "INSERT INTO t SELECT * FROM unnest($1::text[], $2::bigint[], $3::integer[], $4::bytea[])"
            let inserted = try connection.execute(
                insert,
                [
                    .textArray(ids), .int64Array(ids.indices.map { Int64($0) * 1_000_000_007 }),
                    .int32Array(ids.indices.map { Int32($0 % 256) }), .bytesArray(ids.map { Array($0.utf8) + [0] }),
                ])
            #expect(inserted.changed == 500)
            let none = try connection.execute(
                insert, [.textArray([]), .int64Array([]), .int32Array([]), .bytesArray([])])
            #expect(none.changed == 0)
            let rows = try connection.execute("SELECT id, n, p, b FROM t WHERE id = $1", [.text("s499")])
            #expect(try rows[0, 1].int64() == 499 * 1_000_000_007)
            #expect(try rows[0, 2].int32() == 499 % 256)
            #expect(try rows[0, 3].data() == Array("s499".utf8) + [0])
        }
    }

    @Test("a failed statement says the server's message and SQLSTATE; a transaction that throws is rolled back")
    func errors() async throws {
        try await TestPostgres.withDatabase { url in
            let connection = try PostgresConnection(url: url)
            try connection.execute("CREATE TABLE t (id text PRIMARY KEY)")
            try connection.execute("INSERT INTO t VALUES ('a')")
            do {
                try connection.execute("INSERT INTO t VALUES ('a')")
                Issue.record("a duplicate key was accepted")
            } catch let error as PostgresError {
                #expect(error.sqlState == "23505")
                #expect(error.message.contains("duplicate key"))
                #expect(!error.connectionLost)
            }
            #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO t VALUES ('b')")
                    try connection.execute("SELECT * FROM no_such_table")
                }
            }
            #expect(try connection.execute("SELECT count(*) FROM t")[0, 0].int64() == 1)
            #expect(connection.isOpen)
        }
    }

    @Test("connection errors name the server without the password")
    func connectionErrors() async throws {
        let server = try #require(TestPostgres.serverURL)
        let wrong = server.replacingOccurrences(of: "navigator:", with: "navigator:x")
        do {
            _ = try PostgresConnection(url: wrong)
            Issue.record("a wrong password was accepted")
        } catch {
            #expect(error.connectionLost)
            #expect(error.message.contains("password authentication failed"))
            #expect(!error.message.contains(String(wrong.split(separator: ":")[2].split(separator: "@")[0])))
            #expect(error.message.contains("navigator:***@127.0.0.1"))
        }
        #expect(throws: PostgresError.self) { _ = try PostgresConnection(url: "mysql://u@h/d") }
    }

    @Test("redacting a URL hides its password only")
    func redaction() {
        #expect(PostgresConnection.redact("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db")
        #expect(PostgresConnection.redact("postgresql://u@h/db") == "postgresql://u@h/db")
        #expect(PostgresConnection.redact("postgresql://h/db?sslmode=require") == "postgresql://h/db?sslmode=require")
        #expect(PostgresConnection.redact("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db")
    }
}
