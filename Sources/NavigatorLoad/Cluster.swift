import NavigatorClient
import NavigatorWire

/// The navigatord instances a load run follows. One instance on SQLite is the whole service;
/// several on PostgreSQL each publish the batches of the sessions they own, count the intents
/// they resolve (a forwarded intent is counted by its owner only) and use their own CPU, so a run
/// against a cluster subscribes to every instance's commands socket and adds up their counters,
/// CPU and memory. The instances are the `instances` request's list at the start of the run.
struct Cluster: Sendable {
    /// One connection per instance for its counters; the first is the one navload was given.
    let connections: [NavigatorConnection]
    /// Every instance's commands endpoints.
    let commandEndpoints: [String]
    /// Each instance's requests endpoint, in the order of `connections`.
    let requestEndpoints: [String]

    var count: Int { connections.count }

    /// The counters of every instance: outcomes added up, subscribers per instance.
    struct Counts {
        var outcomes: [String: UInt64] = [:]
        var subscribersEach: [UInt64] = []
        /// Intents a shell acknowledged within the landing window, all routes, and their time to
        /// land in `landBounds` (seconds; the last count: beyond them).
        var landed: UInt64 = 0
        var landTimes: [UInt64] = []
        var landBounds: [Double] = []
    }

    /// Asks the instance at `connection` for the live instances and connects to the others.
    static func discover(_ connection: NavigatorConnection, plan: LoadPlan) async throws -> Cluster {
        let single = Cluster(
            connections: [connection], commandEndpoints: [plan.endpoints.commands],
            requestEndpoints: [plan.endpoints.requests])
        // A service without the request answers UNKNOWN_REQUEST: one instance.
        guard case .instances(let list)? = try await connection.request(.instances(.init())).kind,
            list.instances.count > 1
        else { return single }
        var connections = [connection]
        var commands = [plan.endpoints.commands]
        var requests = [plan.endpoints.requests]
        for instance in list.instances where !instance.answering {
            guard let request = instance.requestEndpoints.first, let command = instance.commandEndpoints.first else {
                throw ClientError(
                    .malformed,
                    "instance \(instance.id) advertises no requests or commands endpoint; navload cannot follow it")
            }
            var endpoints = plan.endpoints
            endpoints.requests = request
            endpoints.commands = command
            connections.append(
                try await NavigatorConnection(endpoints: endpoints, timeout: .milliseconds(Int(plan.timeout * 1000))))
            commands += instance.commandEndpoints
            requests.append(request)
        }
        return Cluster(connections: connections, commandEndpoints: commands, requestEndpoints: requests)
    }

    /// Every instance's counters now.
    func stats() async throws -> Counts {
        var counts = Counts()
        for connection in connections {
            let stats = try await connection.stats()
            counts.outcomes.merge(stats.intentsByOutcome, uniquingKeysWith: +)
            counts.subscribersEach.append(stats.subscribers)
            for route in stats.routes {
                counts.landed += route.landed
                if counts.landTimes.count < route.landBucketCounts.count {
                    counts.landTimes += Array(
                        repeating: 0, count: route.landBucketCounts.count - counts.landTimes.count)
                    counts.landBounds = route.landBucketBoundsSeconds
                }
                for (index, count) in route.landBucketCounts.enumerated() { counts.landTimes[index] += count }
            }
        }
        return counts
    }

    /// The processes to measure: the one given, else the navigatord listening on the intents
    /// endpoint (one instance) or on each instance's requests endpoint (several on this machine).
    func processes(_ plan: LoadPlan) throws(ClientError) -> ProcessGroup? {
        if let pid = plan.servicePID { return ProcessGroup(members: [ProcessStats(pid: pid)]) }
        let endpoints = count == 1 ? [plan.endpoints.intents] : requestEndpoints
        var pids: [Int32] = []
        for endpoint in endpoints {
            // An instance on another machine: its CPU and memory cannot be read from here.
            guard let pid = try ProcessStats.service(listeningOn: endpoint) else { return nil }
            if !pids.contains(pid) { pids.append(pid) }
        }
        return ProcessGroup(members: pids.map(ProcessStats.init))
    }

    /// Closes the connections this cluster opened (not the one it was given).
    func close() async {
        for connection in connections.dropFirst() { await connection.close() }
    }
}
