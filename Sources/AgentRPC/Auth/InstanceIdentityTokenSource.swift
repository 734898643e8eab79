import AgentCore
import NIOCore
import NIOHTTP1
import OutboundProxy

/// A session token traded for the instance's cloud identity on every call (before every
/// connection attempt, as the reference refreshes it): ``InstanceIdentityFlow``'s steps
/// performed over HTTP, the agent's extra headers on each request.
public struct InstanceIdentityTokenSource: SessionTokenSource {
    /// A metadata answer larger than this fails the exchange (a JWT or an attested document
    /// is a few KiB).
    public static let maxMetadataBytes = 64 << 10
    /// Each metadata request must be answered within this (the reference's 10 s for the exchange).
    public static let metadataTimeout: Duration = .seconds(10)

    public let cloud: InstanceIdentityCloud
    public let metadataHost: String
    public let agentName: String?
    /// coderd, without a token; its extra headers go to the metadata service too.
    private let rest: CoderRESTClient
    /// Metadata services are reached directly or, as Go's default transport does, through the
    /// proxy the environment names for them (only loopback is exempt; `NO_PROXY` can name
    /// 169.254.169.254).
    private let proxies: ProxyEnvironment

    public init(
        cloud: InstanceIdentityCloud, metadataHost: String, agentName: String?, rest: CoderRESTClient,
        proxies: ProxyEnvironment = .process
    ) {
        self.cloud = cloud
        self.metadataHost = metadataHost
        self.agentName = agentName
        self.rest = rest.with(token: nil)
        self.proxies = proxies
    }

    public func sessionToken() async throws -> String {
        var flow = InstanceIdentityFlow(cloud: cloud, metadataHost: metadataHost, agentName: agentName)
        var step = flow.start()
        // At most four steps (AWS: three metadata requests and the post).
        for _ in 0..<4 {
            switch step {
            case .failed(let error):
                throw error
            case .metadata(let request):
                let (status, body) = try await fetch(request)
                step = flow.received(status: status, body: body)
            case .post(let path, let body):
                let response: CoderRESTResponse
                do {
                    response = try await rest.send(.POST, path, json: body)
                } catch {
                    throw InstanceIdentityError(error.description)
                }
                return try InstanceIdentityFlow.sessionToken(from: response).get()
            }
        }
        throw InstanceIdentityError("instance identity exchange did not finish")
    }

    /// One metadata request: status and body, bounded in size and time.
    func fetch(_ metadata: MetadataRequest) async throws(InstanceIdentityError) -> (Int, [UInt8]) {
        let what = "\(metadata.method) \(metadata.url)"
        let headers = metadata.headers + rest.headers
        guard let request = CheckedHTTPClient.Request(method: HTTPMethod(rawValue: metadata.method), url: metadata.url, headers: headers)
        else { throw InstanceIdentityError("\(what): not an http:// or https:// URL") }
        let client: CheckedHTTPClient
        do {
            client = try CheckedHTTPClient(route: ProxyRoute.choose(url: metadata.url, environment: proxies, anyProxyKind: true))
        } catch {
            throw InstanceIdentityError("\(what): \(error)")
        }
        do {
            return try await client.execute(request, deadline: .now() + TimeAmount(Self.metadataTimeout)) { head, chunks in
                let bytes = try await chunks.collect(upTo: Self.maxMetadataBytes)
                return (Int(head.status.code), bytes)
            }
        } catch is NIOTooManyBytesError {
            throw InstanceIdentityError("\(what): the answer is larger than \(Self.maxMetadataBytes >> 10) KiB")
        } catch {
            throw InstanceIdentityError("\(what): \(CoderRESTClient.describe(error))")
        }
    }
}
