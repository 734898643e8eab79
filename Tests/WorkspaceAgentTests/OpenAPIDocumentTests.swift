import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// docs/openapi.yaml against the routes the real binary mounts.
///
/// The agent, started with `--log-level trace`, logs one `route mounted` line per route of
/// its HTTP API (method, path as Hummingbird prints it, whether it is a WebSocket route).
/// The document is read with Debian's PyYAML (python3-yaml, in the Makefile's deps) and
/// checked for what a reader relies on: OpenAPI 3.1, every `$ref` resolves, every `{param}`
/// of a path is declared, operation ids are unique, every operation has responses. Then:
/// every mounted route is documented with its method, every documented route is mounted,
/// and `x-websocket: true` marks exactly the WebSocket routes. An operation marked
/// `x-planned: true` (documented ahead of its code) may be missing, and must lose the mark
/// once it is mounted.
@Suite(.timeLimit(.minutes(2)))
struct OpenAPIDocumentTests {
    struct Route: Hashable, Comparable, CustomStringConvertible {
        var method: String
        var path: String
        var description: String { "\(method) \(path)" }
        static func < (a: Route, b: Route) -> Bool { (a.path, a.method) < (b.path, b.method) }
    }

    static let reader = #"""
        import json, re, sys, yaml
        doc = yaml.safe_load(open(sys.argv[1]))
        problems, ops, ids = [], [], set()
        if not str(doc.get("openapi", "")).startswith("3.1"):
            problems.append("openapi must be 3.1.x, is %r" % doc.get("openapi"))
        def resolve(ref):
            node = doc
            for part in ref.lstrip("#/").split("/"):
                if not isinstance(node, dict) or part not in node:
                    return None
                node = node[part]
            return node
        def walk(node, where):
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and resolve(ref) is None:
                    problems.append("%s: $ref %s does not resolve" % (where, ref))
                for key, value in node.items():
                    walk(value, where + "/" + str(key))
            elif isinstance(node, list):
                for index, value in enumerate(node):
                    walk(value, "%s[%d]" % (where, index))
        walk(doc, "#")
        methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
        for path, item in (doc.get("paths") or {}).items():
            for method, op in item.items():
                if method not in methods:
                    continue
                where = "%s %s" % (method.upper(), path)
                if not op.get("responses"):
                    problems.append(where + ": no responses")
                oid = op.get("operationId")
                if not oid or oid in ids:
                    problems.append(where + ": missing or repeated operationId %r" % oid)
                ids.add(oid)
                declared = set()
                for p in (item.get("parameters") or []) + (op.get("parameters") or []):
                    p = resolve(p["$ref"]) if "$ref" in p else p
                    if p and p.get("in") == "path":
                        declared.add(p.get("name"))
                for name in re.findall(r"\{([^}]+)\}", path):
                    if name not in declared:
                        problems.append(where + ": path parameter {%s} is not declared" % name)
                ops.append({"method": method.upper(), "path": path,
                            "websocket": bool(op.get("x-websocket")), "planned": bool(op.get("x-planned"))})
        print(json.dumps({"problems": problems, "operations": ops}))
        """#

    struct Document: Decodable {
        struct Operation: Decodable {
            var method: String
            var path: String
            var websocket: Bool
            var planned: Bool
        }
        var problems: [String]
        var operations: [Operation]
    }

    static func readDocument() async throws -> Document {
        let path = DocExamples.repositoryRoot.appendingPathComponent("docs/openapi.yaml").path
        let outcome = await ChildProgram.run(["/usr/bin/python3", "-c", reader, path], stderrToStdout: true)
        try #require(outcome.status == 0, "reading \(path) failed: \(outcome.stdout)")
        return try JSONDecoder().decode(Document.self, from: Data(outcome.stdout.utf8))
    }

    @Test func documentsExactlyTheMountedRoutes() async throws {
        let document = try await Self.readDocument()
        #expect(document.problems.isEmpty, "docs/openapi.yaml:\n\(document.problems.joined(separator: "\n"))")

        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--log-level", "trace", "--log-format", "json"])
        defer { agent.cleanup() }
        _ = try await agent.port()
        var mounted: Set<Route> = []
        var upgrades: Set<Route> = []
        for line in agent.log.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["msg"] as? String == "route mounted",
                let method = object["method"] as? String, let path = object["path"] as? String
            else { continue }
            let route = Route(method: method, path: path)
            mounted.insert(route)
            if object["websocket"] as? String == "true" { upgrades.insert(route) }
        }
        // The routes every agent has; an empty set would mean the log line is gone.
        #expect(mounted.contains(Route(method: "GET", path: "/healthz")), "no `route mounted` lines in the log:\n\(agent.log.prefix(4000))")
        #expect(upgrades.contains(Route(method: "GET", path: "/api/v0/processes/{id}/stream")))

        let documented = Set(document.operations.map { Route(method: $0.method, path: $0.path) })
        let planned = Set(document.operations.filter(\.planned).map { Route(method: $0.method, path: $0.path) })
        let documentedUpgrades = Set(document.operations.filter(\.websocket).map { Route(method: $0.method, path: $0.path) })

        let undocumented = mounted.subtracting(documented).sorted()
        #expect(undocumented.isEmpty, "mounted but not in docs/openapi.yaml: \(undocumented)")
        let missing = documented.subtracting(mounted).subtracting(planned).sorted()
        #expect(missing.isEmpty, "in docs/openapi.yaml but not mounted (a wrong method or path?): \(missing)")
        let arrived = planned.intersection(mounted).sorted()
        #expect(arrived.isEmpty, "mounted now: remove `x-planned: true` from \(arrived) in docs/openapi.yaml")
        let wrongUpgrades = upgrades.symmetricDifference(documentedUpgrades).intersection(mounted).sorted()
        #expect(wrongUpgrades.isEmpty, "`x-websocket: true` must mark exactly the WebSocket routes; differs for \(wrongUpgrades)")

        agent.signal(SIGTERM)
        await agent.exitStatus()
    }
}
