import AgentProto
import DRPC
import HostStats
import SwiftProtobuf
import Synchronization

/// Resource monitoring (Agent API 2.4) as coderd serves it: a configuration a test sets,
/// every push kept in arrival order, pushes that can be made to fail.
extension ControlPlaneDouble {
    /// What the two methods answer and what they received.
    public final class ResourcesMonitoring: Sendable {
        public struct State: Sendable {
            public var configuration: ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse
            public var configurationCalls = 0
            public var pushes: [ResourcesMonitoring_PushResourcesMonitoringUsageRequest] = []
            /// When set, each push fails with this text (code 0), as a coderd whose database failed.
            public var pushFailure: String?
        }

        public let state: Mutex<State>

        init(_ configuration: ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse) {
            state = Mutex(State(configuration: configuration))
        }
    }

    /// coderd's configuration: 20 datapoints every 10 s, memory on, `volumes` watched.
    public static func resourcesMonitoringConfiguration(
        datapoints: Int32 = 20, intervalSeconds: Int32 = 10, memory: Bool? = true, volumes: [String] = ["/"]
    ) -> ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse {
        var configuration = ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse()
        configuration.config.numDatapoints = datapoints
        configuration.config.collectionIntervalSeconds = intervalSeconds
        if let memory { configuration.memory.enabled = memory }
        configuration.volumes = volumes.map { path in
            var volume = ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse.Volume()
            volume.enabled = true
            volume.path = path
            return volume
        }
        return configuration
    }

    /// Serves both methods on connections made from now on; the returned object holds
    /// what they answer and receive.
    public func serveResourcesMonitoring(
        _ configuration: ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse = resourcesMonitoringConfiguration()
    ) -> ResourcesMonitoring {
        let monitoring = ResourcesMonitoring(configuration)
        handle(DRPCMethodPath.agent("GetResourcesMonitoringConfiguration")) { bytes in
            _ = try ResourcesMonitoring_GetResourcesMonitoringConfigurationRequest(serializedBytes: bytes)
            let answer = monitoring.state.withLock { state in
                state.configurationCalls += 1
                return state.configuration
            }
            return try answer.serializedBytes()
        }
        handle(DRPCMethodPath.agent("PushResourcesMonitoringUsage")) { bytes in
            let request = try ResourcesMonitoring_PushResourcesMonitoringUsageRequest(serializedBytes: bytes)
            let failure = monitoring.state.withLock { state -> String? in
                guard state.pushFailure == nil else { return state.pushFailure }
                state.pushes.append(request)
                return nil
            }
            if let failure { throw DRPCErrorBody(code: 0, message: failure) }
            return try ResourcesMonitoring_PushResourcesMonitoringUsageResponse().serializedBytes()
        }
        return monitoring
    }
}
