import SwiftProtobuf

/// The control plane's monitoring settings (coderd's: every 10 s, 20 datapoints) as the
/// monitor uses them, within this agent's bounds.
public struct ResourcesMonitorPlan: Equatable, Sendable {
    /// Most datapoints one push carries (coderd asks for 20).
    public static let maxWindow = 120
    /// Most volumes measured per tick; the rest are left out.
    public static let maxVolumes = 16
    /// Longest volume path measured (bytes); a longer one is left out.
    public static let maxPathBytes = 1024

    public var interval: Duration
    public var window: Int
    public var memory: Bool
    public var volumes: [String]
    /// What was cut to fit the bounds, for the log.
    public var trimmed: [String]

    /// The plan for a configuration; nil when its interval or window is not positive
    /// (where the reference's ticker or queue would crash).
    public init?(_ configuration: ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse) {
        let seconds = configuration.config.collectionIntervalSeconds
        let count = Int(configuration.config.numDatapoints)
        guard seconds > 0, count > 0 else { return nil }
        interval = .seconds(seconds)
        window = min(count, Self.maxWindow)
        memory = configuration.hasMemory && configuration.memory.enabled
        trimmed = count > Self.maxWindow ? ["a window of \(count) datapoints cut to \(Self.maxWindow)"] : []
        var volumes: [String] = []
        for volume in configuration.volumes where volume.enabled {
            if volume.path.utf8.count > Self.maxPathBytes {
                trimmed.append("a volume path of \(volume.path.utf8.count) bytes left out")
            } else if volumes.count == Self.maxVolumes {
                trimmed.append("volume \(volume.path) left out (more than \(Self.maxVolumes))")
            } else {
                volumes.append(volume.path)
            }
        }
        self.volumes = volumes
    }
}

/// One tick's readings: when, and the memory and volumes that could be read.
public struct ResourcesDatapoint: Equatable, Sendable {
    /// Bytes used of a total.
    public struct Usage: Equatable, Sendable {
        public var total: Int64
        public var used: Int64

        public init(total: Int64, used: Int64) {
            self.total = total
            self.used = used
        }
    }

    /// A volume's path and use.
    public struct Volume: Equatable, Sendable {
        public var path: String
        public var usage: Usage

        public init(path: String, usage: Usage) {
            self.path = path
            self.usage = usage
        }
    }

    public var collectedAt: Google_Protobuf_Timestamp
    public var memory: Usage?
    public var volumes: [Volume]

    public init(collectedAt: Google_Protobuf_Timestamp, memory: Usage? = nil, volumes: [Volume] = []) {
        self.collectedAt = collectedAt
        self.memory = memory
        self.volumes = volumes
    }

    /// The datapoint on the wire.
    var message: ResourcesMonitoring_PushResourcesMonitoringUsageRequest.Datapoint {
        var point = ResourcesMonitoring_PushResourcesMonitoringUsageRequest.Datapoint()
        point.collectedAt = collectedAt
        if let memory {
            point.memory.total = memory.total
            point.memory.used = memory.used
        }
        point.volumes = volumes.map { volume in
            var usage = ResourcesMonitoring_PushResourcesMonitoringUsageRequest.Datapoint.VolumeUsage()
            usage.volume = volume.path
            usage.total = volume.usage.total
            usage.used = volume.usage.used
            return usage
        }
        return point
    }
}

/// The reference's FIFO: nothing to send until it holds `capacity` datapoints, then the
/// whole window after each new one. Memory: `capacity` datapoints (at most 120).
public struct ResourcesMonitorWindow: Sendable {
    public let capacity: Int
    public private(set) var datapoints: [ResourcesDatapoint] = []

    public init(capacity: Int) {
        precondition(capacity > 0, "a window holds at least one datapoint")
        self.capacity = capacity
        datapoints.reserveCapacity(capacity)
    }

    /// Adds `datapoint`; the push to send, when the window is full.
    public mutating func append(_ datapoint: ResourcesDatapoint) -> ResourcesMonitoring_PushResourcesMonitoringUsageRequest? {
        if datapoints.count >= capacity { datapoints.removeFirst() }
        datapoints.append(datapoint)
        guard datapoints.count == capacity else { return nil }
        var request = ResourcesMonitoring_PushResourcesMonitoringUsageRequest()
        request.datapoints = datapoints.map(\.message)
        return request
    }
}
