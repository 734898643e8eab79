/// A throwaway certificate for `localhost`, 127.0.0.1 and ::1, for the TLS relay in tests.
///
/// Made by the `openssl` CLI (``opensslArguments``), which the test runs with its own
/// process runner (the project's tests use `ChildProgram`, never Foundation's `Process`).
public struct SelfSignedCertificate: Sendable {
    /// The PEM certificate.
    public let certificatePath: String
    /// Its PEM private key.
    public let keyPath: String

    /// The certificate `opensslArguments(directory:)` writes into `directory`.
    public init(directory: String) {
        self.certificatePath = directory + "/cert.pem"
        self.keyPath = directory + "/key.pem"
    }

    /// `openssl req -x509` for an EC P-256 key, valid one day, written to the paths above.
    public var opensslArguments: [String] {
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", keyPath, "-out", certificatePath, "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
        ]
    }
}
