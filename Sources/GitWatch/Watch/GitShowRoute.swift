import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird

/// `GET /api/v0/git/show?repo_root=&path=&ref=`, read with libgit2.
struct GitShowRoute: Sendable {
    struct Contents: Encodable, Sendable {
        var contents: String
    }

    func show(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let query = GoQuery(request)
        guard let root = query.get("repo_root"), !root.isEmpty, let path = query.get("path"), !path.isEmpty,
            let ref = query.get("ref"), !ref.isEmpty
        else {
            throw APIError(.badRequest, "Missing required query parameters.", detail: "repo_root, path, and ref are required.")
        }
        guard FileManager.default.fileExists(atPath: root + "/.git") else {
            throw APIError(.badRequest, "Not a git repository.", detail: "\(root) does not contain a .git directory.")
        }
        let result = try await GitPool.shared.run { _ -> Result<String, GitSnapshotter.ShowFailure> in
            Result { () throws(GitSnapshotter.ShowFailure) in try GitSnapshotter.show(root: root, path: path, ref: ref) }
        }
        switch result {
        case .success(let text): return JSONResponse.make(Contents(contents: text))
        // The reference's text whatever git said (a missing path, an unknown ref).
        case .failure(.notFound): throw APIError(.notFound, "File not found.", detail: "\(path) does not exist at ref \(ref).")
        case .failure(.binary): throw APIError(.unprocessableContent, "binary file")
        case .failure(.tooLarge): throw APIError(.unprocessableContent, "file too large")
        }
    }
}
