import AgentProto
import DRPC
import SwiftProtobuf
import Synchronization

/// GetAnnouncementBanners (Agent API v2.1) as coderd serves it: the deployment's banners,
/// configurable by a test, with every call counted; it can fail the call or answer as a
/// control plane without the method does (dRPC Unimplemented).
extension ControlPlaneDouble {
    public struct BannerState: Sendable {
        /// What each call answers.
        public var banners: [Coder_Agent_V2_BannerConfig] = []
        /// Calls received (answered or not).
        public var calls = 0
        /// When set, each call fails with this text (code 0), as a coderd whose database failed.
        public var failure: String?
        /// When set, each call is answered with dRPC Unimplemented (code 12).
        public var unimplemented = false
    }

    /// A banner as a test writes it.
    public static func banner(_ message: String, enabled: Bool = true, color: String = "#004852") -> Coder_Agent_V2_BannerConfig {
        var banner = Coder_Agent_V2_BannerConfig()
        banner.enabled = enabled
        banner.message = message
        banner.backgroundColor = color
        return banner
    }

    func registerBanners(on server: inout DRPCServer) {
        server.register(DRPCMethodPath.agent("GetAnnouncementBanners")) { bytes in
            _ = try Coder_Agent_V2_GetAnnouncementBannersRequest(serializedBytes: bytes)
            let state = self.bannerState.withLock { state -> BannerState in
                state.calls += 1
                return state
            }
            if state.unimplemented {
                throw DRPCErrorBody(code: DRPCErrorBody.unimplemented, message: "unknown rpc: \"/coder.agent.v2.Agent/GetAnnouncementBanners\"")
            }
            if let failure = state.failure { throw DRPCErrorBody(code: 0, message: failure) }
            var response = Coder_Agent_V2_GetAnnouncementBannersResponse()
            response.announcementBanners = state.banners
            return try response.serializedBytes()
        }
    }
}
