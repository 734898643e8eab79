import AgentCore
import AgentHTTP
import AgentHost
import AgentTestSupport
import ArgumentParser
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// A small module built only through the contract: options with an environment twin,
/// routes mounted at a base path, and services in each shutdown phase.
@Suite(.timeLimit(.minutes(3)))
struct ModuleContractTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func optionsReadTheFlagThenTheVariable() throws {
        let fromFlag = try GreeterOptions.parse(["--greeting", "hello"]).resolve(Settings(environment: ["GREETER_GREETING": "env"]))
        #expect(fromFlag.greeting == "hello")
        let fromEnv = try GreeterOptions.parse([]).resolve(Settings(environment: ["GREETER_GREETING": "env"]))
        #expect(fromEnv.greeting == "env")
        #expect(try GreeterOptions.parse([]).resolve(Settings(environment: [:])).greeting == "hi")
        #expect(throws: ConfigurationError("GREETER_LOUD: invalid boolean \"maybe\" (expected true or false)")) {
            try GreeterOptions.parse([]).resolve(Settings(environment: ["GREETER_LOUD": "maybe"]))
        }
    }

    @Test func moduleIsMountedRunAndStoppedInItsPhase() async throws {
        let events = EventLog()
        let options = try GreeterOptions.parse(["--greeting", "hello"]).resolve(Settings(environment: [:]))
        var configuration = AgentHost.Configuration()
        configuration.handlesSignals = false
        configuration.enforcesBound = false
        let host = AgentHost(configuration: configuration, logger: Self.quiet)
        let (ports, portSink) = AsyncStream<Int>.makeStream()
        host.listen(on: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0)), for: "the HTTP API", logMessage: "listening") { address in
            portSink.yield(Int(address.split(separator: ":").last!)!)
            portSink.finish()
        }
        // The client is known only once the server listens; the work phase's stop uses it.
        let client = Mutex<RawHTTPClient?>(nil)
        let duringWork = Mutex<Int?>(nil)
        host.mount(
            GreeterModule(configuration: options, events: events) {
                // At the work phase, the server exists but takes no new request.
                let response = try? await client.withLock { $0 }!.request("GET", "/api/v0/greeter/greeting")
                duringWork.withLock { $0 = response?.status }
            },
            at: "/api/v0/greeter")

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await host.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let http = RawHTTPClient(port: port)
            client.withLock { $0 = http }

            let greeting = try await http.request("GET", "/api/v0/greeter/greeting")
            #expect(greeting.status == 200)
            #expect(greeting.bodyText.contains("hello"))
            #expect(try await http.request("GET", "/greeting").status == 404, "routes live under the mount path only")
            let plain = try await http.request("GET", "/api/v0/greeter/socket")
            #expect(plain.status == 426, "the WebSocket route is mounted too: \(plain)")
            #expect(await eventually { events.all.filter { $0.hasPrefix("run ") }.count == 4 })

            await host.shutdown()
            try await group.next()
        }
        let stops = events.all.filter { $0.hasPrefix("stop ") }
        #expect(stops == ["stop announce", "stop work", "stop upward", "stop serving"])
        #expect(duringWork.withLock { $0 } == 503, "HTTP stops taking requests at announce")
    }

    @Test func shutdownOrderFollowsPhasesNotInsertionOrder() async throws {
        let events = EventLog()
        var configuration = AgentHost.Configuration()
        configuration.handlesSignals = false
        configuration.enforcesBound = false
        let host = AgentHost(configuration: configuration, logger: Self.quiet)
        // Added in the reverse of their phases, and two in one phase.
        host.add(PhaseModule(events: events, services: [("late", .serving), ("upward", .upward)]))
        host.add(PhaseModule(events: events, services: [("work-a", .work), ("first", .announce)]))
        host.add(PhaseModule(events: events, services: [("work-b", .work)]))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await host.run() }
            #expect(await eventually { events.all.count == 5 })
            await host.shutdown()
            try await group.next()
        }
        let stops = events.all.filter { $0.hasPrefix("stop ") }
        // Within a phase, the module added last stops first.
        #expect(stops == ["stop first", "stop work-b", "stop work-a", "stop upward", "stop late"])
    }
}

/// Events in the order they happened.
final class EventLog: Sendable {
    private let events = Mutex<[String]>([])
    func append(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

/// Records its start, and its stop when graceful shutdown reaches it.
struct RecordingService: Service {
    let name: String
    let events: EventLog
    var onStop: @Sendable () async -> Void = {}

    func run() async throws {
        events.append("run \(name)")
        try? await gracefulShutdown()
        await onStop()
        events.append("stop \(name)")
    }
}

struct GreeterOptions: ParsableArguments {
    @Option(name: .long, help: "The greeting. Env GREETER_GREETING. Default hi.")
    var greeting: String?

    @Option(name: .long, help: "Shout: true or false. Env GREETER_LOUD. Default false.")
    var loud: String?

    struct Configuration: Sendable {
        var greeting: String
        var loud: Bool
    }

    func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        Configuration(
            greeting: try settings.string(greeting, flag: "--greeting", variable: "GREETER_GREETING") ?? "hi",
            loud: try settings.bool(loud, flag: "--loud", variable: "GREETER_LOUD") ?? false)
    }
}

struct GreeterModule: HTTPModule {
    let configuration: GreeterOptions.Configuration
    let events: EventLog
    let duringWork: @Sendable () async -> Void

    init(configuration: GreeterOptions.Configuration, events: EventLog, duringWork: @escaping @Sendable () async -> Void) {
        self.configuration = configuration
        self.events = events
        self.duringWork = duringWork
    }

    var name: String { "greeter" }

    func routes(_ routes: inout AgentRoutes) {
        let greeting = configuration.loud ? configuration.greeting.uppercased() : configuration.greeting
        routes.get("greeting") { _, _ in JSONResponse.make(["greeting": greeting]) }
        routes.webSocket("socket") { _ throws(APIError) in
        } handler: { _, outbound, _ in
            try await outbound.write(.text("hello"))
        }
    }

    var services: [ModuleService] {
        [
            ModuleService("serving", RecordingService(name: "serving", events: events), stopsIn: .serving),
            ModuleService("upward", RecordingService(name: "upward", events: events), stopsIn: .upward),
            ModuleService("work", RecordingService(name: "work", events: events, onStop: duringWork), stopsIn: .work),
            ModuleService("announce", RecordingService(name: "announce", events: events), stopsIn: .announce),
        ]
    }
}

struct PhaseModule: AgentModule {
    let events: EventLog
    let named: [(String, ShutdownPhase)]

    init(events: EventLog, services: [(String, ShutdownPhase)]) {
        self.events = events
        self.named = services
    }

    var name: String { "phases" }

    var services: [ModuleService] {
        named.map { ModuleService($0.0, RecordingService(name: $0.0, events: events), stopsIn: $0.1) }
    }
}
