/// Who makes a call through the ``NavigatorPort``: the client of the access file an edge
/// (HTTP's bearer token, say) vouched for. The engine authorizes the call as it would the same
/// client's request on its sockets.
public struct Caller: Sendable, Hashable, CustomStringConvertible {
    /// The client's name in the access file; nil for a caller nobody vouched for, whom only an
    /// engine without security serves.
    public var name: String?

    public init(name: String?) { self.name = name }

    /// A caller with no identity: what a service without security takes from anyone.
    public static let anonymous = Caller(name: nil)

    public var description: String { name.map { "client \($0)" } ?? "an anonymous caller" }
}
