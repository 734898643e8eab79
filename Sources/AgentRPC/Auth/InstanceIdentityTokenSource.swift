import AgentCore
import AsyncHTTPClient
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
    private let client: HTTPClient?
    private let proxies: ProxyEnvironment

    /// Metadata services are reached directly or, as Go's default transport does, through the
    /// proxy the environment names for them (only loopback is exempt; `NO_PROXY` can name
    /// 169.254.169.254). `client` replaces that choice with a fixed client.
    static let metadataClients = SharedHTTPClients(configuration: HTTPClient.Configuration(), direct: .shared)

    public init(
        cloud: InstanceIdentityCloud, metadataHost: String, agentName: String?, rest: CoderRESTClient, client: HTTPClient? = nil,
        proxies: ProxyEnvironment = .process
    ) {
        self.cloud = cloud
        self.metadataHost = metadataHost
        self.agentName = agentName
        self.rest = rest.with(token: nil)
        self.client = client
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
        var request = HTTPClientRequest(url: metadata.url)
        request.method = HTTPMethod(rawValue: metadata.method)
        for (name, value) in metadata.headers { request.headers.add(name: name, value: value) }
        for (name, value) in rest.headers { request.headers.add(name: name, value: value) }
        let deadline = NIODeadline.now() + TimeAmount(Self.metadataTimeout)
        let client: HTTPClient
        switch self.client.map({ .success($0) }) ?? Self.metadataClients.client(for: metadata.url, proxies: proxies) {
        case .success(let chosen): client = chosen
        case .failure(let error): throw InstanceIdentityError("\(metadata.method) \(metadata.url): \(error)")
        }
        do {
            let response = try await client.execute(request, deadline: deadline)
            let bytes = try await response.body.collect(upTo: Self.maxMetadataBytes)
            return (Int(response.status.code), Array(bytes.readableBytesView))
        } catch is NIOTooManyBytesError {
            throw InstanceIdentityError("\(metadata.method) \(metadata.url): the answer is larger than \(Self.maxMetadataBytes >> 10) KiB")
        } catch {
            throw InstanceIdentityError("\(metadata.method) \(metadata.url): \(CoderRESTClient.describe(error))")
        }
    }
}
