import Prometheus
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The standard `process_*` metrics of the agent itself (as Prometheus' client libraries
/// export them), read from `/proc/self` at each scrape, and the build-info gauge. A scrape
/// reads three small files and counts `/proc/self/fd`: no sampling thread.
final class ProcessMetrics: Sendable {
    private let cpu: Prometheus.Counter
    private let resident: Prometheus.Gauge
    private let virtual: Prometheus.Gauge
    private let openFDs: Prometheus.Gauge
    private let maxFDs: Prometheus.Gauge
    private let startTime: Prometheus.Gauge
    /// The CPU seconds already added to the counter (it only increments).
    private let countedCPU = Mutex<Double>(0)

    init(registry: PrometheusCollectorRegistry, version: String, commit: String) {
        func descriptor(_ name: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: MetricsHelp.text(for: name))
        }
        cpu = registry.makeCounter(descriptor: descriptor("process_cpu_seconds_total"))
        resident = registry.makeGauge(descriptor: descriptor("process_resident_memory_bytes"))
        virtual = registry.makeGauge(descriptor: descriptor("process_virtual_memory_bytes"))
        openFDs = registry.makeGauge(descriptor: descriptor("process_open_fds"))
        maxFDs = registry.makeGauge(descriptor: descriptor("process_max_fds"))
        startTime = registry.makeGauge(descriptor: descriptor("process_start_time_seconds"))
        registry.makeGauge(descriptor: descriptor("workspace_agent_build_info"), labels: [("version", version), ("commit", commit)]).set(Double(1))
        update()
    }

    /// Reads the current values (called before each scrape).
    func update() {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        if let stat = Self.statFields(), stat.count > 23, ticks > 0 {
            // Fields 14-15 (utime, stime) and 22 (starttime) in clock ticks, 23 vsize in
            // bytes, 24 rss in pages (numbered from 1; the array starts at field 3).
            let user = Double(stat[11]) ?? 0
            let system = Double(stat[12]) ?? 0
            let total = (user + system) / ticks
            countedCPU.withLock { counted in
                if total > counted {
                    cpu.increment(by: total - counted)
                    counted = total
                }
            }
            virtual.set(Double(stat[20]) ?? 0)
            resident.set((Double(stat[21]) ?? 0) * Double(sysconf(Int32(_SC_PAGESIZE))))
            if let bootTime = Self.bootTime(), let started = Double(stat[19]) {
                startTime.set(bootTime + started / ticks)
            }
        }
        openFDs.set(Double(Self.openDescriptors()))
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs.set(Double(limit.rlim_cur)) }
    }

    /// `/proc/self/stat` from field 3 on (after the command name, which may hold spaces).
    private static func statFields() -> [Substring]? {
        guard let text = read("/proc/self/stat"), let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// The boot time (`btime` in `/proc/stat`), seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let text = read("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") { return Double(line.dropFirst(6)) }
        return nil
    }

    private static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
        }
        // The directory's own descriptor is not the agent's.
        return max(0, count - 1)
    }

    /// A small /proc file's text (at most 64 KiB: `/proc/stat` on a large machine is a few).
    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65536 {
            let got = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            bytes += chunk[0..<got]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
