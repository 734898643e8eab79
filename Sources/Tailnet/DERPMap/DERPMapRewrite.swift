import AgentProto

/// The embedded-relay rewrite: in every region with
/// `embedded_relay`, each node that is not STUN-only is pointed at the agent's own access URL
/// (host, port, plain HTTP when the URL is http), because the agent may reach coderd by a
/// different URL than the deployment's. Applied to the manifest's map and every streamed map.
public enum DERPMapRewrite {
    public static func apply(_ map: inout Coder_Tailnet_V2_DERPMap, accessURL: AccessURL) {
        for (id, var region) in map.regions where region.embeddedRelay {
            for index in region.nodes.indices where !region.nodes[index].stunOnly {
                region.nodes[index].hostName = accessURL.host
                region.nodes[index].derpPort = Int32(accessURL.port)
                region.nodes[index].forceHTTP = accessURL.scheme == "http"
            }
            map.regions[id] = region
        }
    }
}
