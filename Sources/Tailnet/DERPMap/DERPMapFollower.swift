import AgentProto
import Logging
import Synchronization
import SwiftProtobuf

/// Holds the DERP map the agent uses: the manifest's, then each one `StreamDERPMaps` sends,
/// every one rewritten for the embedded relay before it is
/// applied. `onChange` runs when the rewritten map differs from the last.
public final class DERPMapFollower: Sendable {
    private let accessURL: AccessURL?
    private let current = Mutex<Coder_Tailnet_V2_DERPMap?>(nil)
    private let onChange: @Sendable (Coder_Tailnet_V2_DERPMap) -> Void
    private let logger: Logger

    /// - Parameter accessURL: the control plane URL the agent dials (nil: no rewrite).
    public init(accessURL: AccessURL?, logger: Logger, onChange: @escaping @Sendable (Coder_Tailnet_V2_DERPMap) -> Void) {
        self.accessURL = accessURL
        self.logger = logger
        self.onChange = onChange
    }

    /// The map in use, rewritten.
    public var map: Coder_Tailnet_V2_DERPMap? { current.withLock { $0 } }

    /// Applies one map (the manifest's or a streamed one).
    public func apply(_ received: Coder_Tailnet_V2_DERPMap) {
        var map = received
        if let accessURL { DERPMapRewrite.apply(&map, accessURL: accessURL) }
        let changed = current.withLock { c -> Bool in
            guard c != map else { return false }
            c = map
            return true
        }
        if changed { onChange(map) }
    }

    /// Applies each map of one `StreamDERPMaps` stream until it ends (a map that does not
    /// decode is logged and skipped).
    public func follow<Maps: AsyncSequence>(_ maps: Maps) async throws where Maps.Element == [UInt8] {
        for try await bytes in maps {
            do {
                apply(try Coder_Tailnet_V2_DERPMap(serializedBytes: bytes))
            } catch {
                logger.warning("DERP map does not decode", metadata: ["error": "\(error)"])
            }
        }
    }
}
