import Synchronization

/// The last scan of listening ports, reused for ``maxAge`` (the reference's 1 s cache): the
/// dashboard polls the list, and a scan walks every process's descriptors.
///
/// Memory: one list.
final class ListeningPortCache: Sendable {
    static let maxAge: Duration = .seconds(1)

    private let scanner: ListeningPortScanner
    private let last = Mutex<(at: ContinuousClock.Instant, ports: [ListeningPort])?>(nil)

    init(scanner: ListeningPortScanner) {
        self.scanner = scanner
    }

    func current(at now: ContinuousClock.Instant = .now) throws(ListeningPortScanner.ScanError) -> [ListeningPort] {
        if let cached = last.withLock({ $0 }), now - cached.at < Self.maxAge { return cached.ports }
        let ports = try scanner.scan()
        last.withLock { $0 = (now, ports) }
        return ports
    }
}
