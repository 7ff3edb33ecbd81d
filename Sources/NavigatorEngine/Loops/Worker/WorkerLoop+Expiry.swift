import NavigatorCore
import NavigatorWire
import ZeroMQ

// Expiry: every `expiryInterval`, the parked intents that are due are refused EXPIRED.
extension WorkerLoop {
    func expire(_ state: inout WorkerState, _ sockets: Sockets) throws {
        // Sessions leave the table as their parked intents go (here, or resolved or released).
        state.parkedSessions.releaseSpareRoom()
        guard !state.parkedSessions.isEmpty else { return }
        let now = WallClock.now()
        // Only sessions with an intent due (or too many parked) are touched.
        let due = state.parkedSessions.filter { $0.value <= now }.keys
        for session in due {
            let (resolver, version) = state.maps.pick(session)
            let (expired, parked) = SessionWork.expire(session, store: store, resolver: resolver, now: now)
            state.noteParked(session, parked, limit: resolver.options.maxParked)
            for parked in expired {
                let route = RouteMetrics.route(of: parked.intent, map: resolver.map)
                counters.routes.count(
                    .expired, route: route, map: state.maps.counted(version),
                    source: counters.routes.source(of: parked.intent))
                counters.routes.notLanded(route: route, map: state.maps.counted(version))
                counters.expired.add()
                counters.refused(.expired, intent: false)  // counted as parked when it came
                try publish(expired: parked, session: session, at: now, &state, sockets)
            }
        }
    }
}
