import Foundation
import Lockbox
import LockboxTPM
import Testing

@testable import LockboxTestSupport

/// Sealing in a real (software) TPM: each test starts its own swtpm, so lockouts and restarts
/// stay private to it.
@Suite(.enabled(if: SoftwareTPM.available, SoftwareTPM.unavailableReason))
struct TPMSealerTests {
    /// Cheap Argon2id for PINs, so many wrong tries stay fast.
    let pinKDF = testKDF

    /// The TPM scripts/dev/swtpm-session.sh starts for the suite, reached the way users reach
    /// theirs: through the default TCTI ($LOCKBOX_TPM_TCTI). Required under the test command.
    @Test func sessionTPMIsReachableThroughTheDefaultTCTI() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let tcti = environment["LOCKBOX_TPM_TCTI"], !tcti.isEmpty else {
            #expect(
                environment["LOCKBOX_REQUIRE_TPM_TESTS"] != "1" && environment["CI"] != "true",
                "LOCKBOX_TPM_TCTI is not set: run the suite inside scripts/dev/swtpm-session.sh")
            return
        }
        #expect(TPMConnection.defaultTCTI(environment: environment) == tcti)
        #expect(TPMConnection.defaultTCTI(environment: [:]) == TPMConnection.deviceTCTI)
        let secret = SecretBytes.random(count: 32)
        let blob = try TPMSealer(tcti: tcti).seal(secret)
        #expect(try TPMSealer(tcti: tcti).unseal(blob) == secret)
        #expect(try TPMDictionaryAttack(reading: TPMConnection(tcti: tcti)).maxTries > 0)
    }

    @Test func sealedSecretComesBackFromTheSameTPM() throws {
        let tpm = try SoftwareTPM()
        let secret = SecretBytes.random(count: 32)
        let blob = try TPMSealer(tcti: tpm.tcti).seal(secret)
        #expect(try TPMSealer(tcti: tpm.tcti).unseal(blob) == secret)
        #expect(TPMSealer.requiresPIN(blob) == false)
        // Nothing of the secret is in the blob in the clear.
        let bytes = secret.withUnsafeBytes { Array($0) }
        #expect(!blob.indices.dropLast(31).contains { Array(blob[$0..<$0 + 32]) == bytes })
    }

    @Test func anotherTPMCannotUnsealIt() throws {
        let tpm = try SoftwareTPM()
        let blob = try TPMSealer(tcti: tpm.tcti).seal(SecretBytes.random(count: 32))
        let other = try SoftwareTPM()  // another TPM: another owner seed, another storage key
        #expect(tpmFailure { try TPMSealer(tcti: other.tcti).unseal(blob) } == .foreignObject)
    }

    @Test func noTPMIsReportedAsUnavailable() throws {
        let tpm = try SoftwareTPM()
        let tcti = tpm.tcti
        tpm.stop()
        #expect(tpmFailure { try TPMSealer(tcti: tcti).seal(SecretBytes.random(count: 32)) } == .unavailable)
        #expect(tpmFailure { try TPMConnection(tcti: "device:/nonexistent/tpmrm0") } == .unavailable)
    }

    /// A TPM that accepts connections and never answers: every operation fails as an
    /// unavailable TPM when its deadline passes, naming the call that waited.
    @Test func aTPMThatNeverAnswersTimesOut() throws {
        let tpm = try SoftwareTPM()
        let blob = try TPMSealer(tcti: tpm.tcti).seal(SecretBytes.random(count: 32))
        let silent = try SilentTPMEndpoint()
        let sealer = TPMSealer(tcti: silent.tcti, timeout: 0.5)
        let clock = ContinuousClock()
        for operation in [
            { _ = try sealer.unseal(blob) }, { _ = try sealer.checkUnsealable(blob) },
            { _ = try sealer.seal(SecretBytes.random(count: 32)) },
            { _ = try TPMDictionaryAttack.read(tcti: silent.tcti, timeout: 0.5) },
        ] {
            let start = clock.now
            do {
                try operation()
                Issue.record("a TPM that never answers answered")
            } catch let error as TPMError {
                #expect(error.failure == .unavailable && error.timeout == 0.5, "\(error)")
                #expect(error.function == "Tss2_TctiLdr_Initialize", "the swtpm TCTI waits for its control channel while connecting")
                #expect(error.description.hasPrefix("the TPM did not answer within 0.5 s"), "\(error)")
            }
            let elapsed = clock.now - start
            #expect(elapsed >= .milliseconds(500) && elapsed < .seconds(2), "took \(elapsed)")
        }
        // Four operations still wait for this TPM: the next fails at once, starting no thread.
        #expect(TPMConnection.maximumWaitingOperations == 4)
        var start = clock.now
        #expect(tpmFailure { try sealer.unseal(blob) } == .unavailable)
        #expect(clock.now - start < .milliseconds(250))
        // Once the endpoint goes away the waiting threads end, and calls are made again: they
        // fail as no TPM, without waiting for the deadline.
        silent.stop()
        start = clock.now
        var error: TPMError?
        repeat {
            do { _ = try sealer.unseal(blob) } catch let failure as TPMError { error = failure }
        } while error?.timeout != nil && clock.now - start < .seconds(5)
        #expect(error?.failure == .unavailable && error?.timeout == nil, "\(String(describing: error))")
        // The timeout comes from LOCKBOX_TPM_TIMEOUT, checked.
        #expect(try TPMConnection.timeout(environment: [:]) == TPMConnection.defaultTimeout)
        #expect(try TPMConnection.timeout(environment: ["LOCKBOX_TPM_TIMEOUT": "0.25"]) == 0.25)
        for wrong in ["0", "-1", "soon", "3601", "nan"] {
            #expect(throws: LockboxError.self) { try TPMConnection.timeout(environment: ["LOCKBOX_TPM_TIMEOUT": wrong]) }
        }
    }

    /// checkUnsealable tells what unseal would meet, without a PIN and without a try.
    @Test func checkUnsealableUsesNoTry() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 3, recoveryTime: 1000)
        let blob = try TPMSealer(tcti: tpm.tcti, pcrs: try PCRSelection([16]), pin: SecretBytes(utf8: "4729"), pinKDF: pinKDF)
            .seal(SecretBytes.random(count: 32))
        let checker = TPMSealer(tcti: tpm.tcti)
        #expect(try checker.checkUnsealable(blob).failedTries == 0)
        // A PIN of the wrong shape is refused before the TPM sees it, and sealing one is refused.
        #expect(throws: LockboxError.self) { try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "47a9")).unseal(blob) }
        #expect(try tpm.dictionaryAttack().failedTries == 0)
        #expect(throws: LockboxError.self) {
            try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "hunter2")).seal(SecretBytes.random(count: 32))
        }
        let passcode = TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "hunter2"), pinKDF: pinKDF, pinPolicy: nil)
        #expect(try passcode.unseal(passcode.seal(SecretBytes(utf8: "s"))) == SecretBytes(utf8: "s"), "nil: any PIN")
        try tpm.tools("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ef", count: 32)])
        #expect(tpmFailure { try checker.checkUnsealable(blob) } == .policyMismatch)
        #expect(try tpm.dictionaryAttack().failedTries == 0)
        let other = try SoftwareTPM()
        #expect(tpmFailure { try TPMSealer(tcti: other.tcti).checkUnsealable(blob) } == .foreignObject)
    }

    @Test func pcrPolicyRefusesOnceThePCRChanges() throws {
        let tpm = try SoftwareTPM()
        let sealer = TPMSealer(tcti: tpm.tcti, pcrs: try PCRSelection([16]))
        let secret = SecretBytes.random(count: 32)
        let blob = try sealer.seal(secret)
        #expect(TPMSealer.boundPCRs(blob) == (try PCRSelection([16])))
        #expect(try sealer.unseal(blob) == secret)
        try tpm.tools("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)])
        #expect(tpmFailure { try sealer.unseal(blob) } == .policyMismatch)
        // A PCR reset on reboot (PCR 16 is the debug PCR, resettable) brings it back.
        try tpm.tools("tpm2_pcrreset", ["16"])
        #expect(try sealer.unseal(blob) == secret)
    }

    @Test func rightPINUnsealsWrongPINIsCountedByTheTPM() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 5, recoveryTime: 1000)
        let secret = SecretBytes.random(count: 32)
        let blob = try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "2468"), pinKDF: pinKDF).seal(secret)
        #expect(TPMSealer.requiresPIN(blob) == true)
        #expect(try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "2468")).unseal(blob) == secret)
        #expect(try tpm.dictionaryAttack().failedTries == 0)
        #expect(tpmFailure { try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "1357")).unseal(blob) } == .authorizationFailed)
        #expect(try tpm.dictionaryAttack().failedTries == 1)
        // No PIN at all is refused before the TPM is asked (and counts nothing).
        #expect(throws: LockboxError.self) { try TPMSealer(tcti: tpm.tcti).unseal(blob) }
        #expect(try tpm.dictionaryAttack().failedTries == 1)
    }

    /// The issue's "must show": N wrong PINs, restore the stored object from before them, then
    /// the right PIN: still locked out, because the count is in the TPM. It survives a restart of
    /// the TPM on the same state, and ends after the recovery time.
    @Test func lockoutSurvivesRestoringTheBlobAndRestartingAndEndsAfterRecoveryTime() throws {
        let tpm = try SoftwareTPM()
        let recoverySeconds: UInt32 = 2
        try tpm.setDictionaryAttack(maxTries: 3, recoveryTime: recoverySeconds)
        let secret = SecretBytes.random(count: 32)
        let pin = SecretBytes(utf8: "2468")
        let saved = try TPMSealer(tcti: tpm.tcti, pin: pin, pinKDF: pinKDF).seal(secret)
        var working = saved
        for guess in ["0000", "1111", "2222"] {
            #expect(tpmFailure { try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: guess)).unseal(working) } == .authorizationFailed)
            working = saved  // the attacker restores the "file" after every try
        }
        #expect(try tpm.dictionaryAttack().inLockout)
        #expect(tpmFailure { try TPMSealer(tcti: tpm.tcti, pin: pin).unseal(saved) } == .lockedOut)

        try tpm.restart()
        #expect(try tpm.dictionaryAttack().inLockout)
        #expect(tpmFailure { try TPMSealer(tcti: tpm.tcti, pin: pin).unseal(saved) } == .lockedOut)

        // recoveryTime seconds forget one failure; an unorderly shutdown (the restart above) may
        // add one more, so wait for two, plus a margin.
        Thread.sleep(forTimeInterval: Double(recoverySeconds) * 2 + 1.5)
        #expect(try tpm.dictionaryAttack().inLockout == false)
        #expect(try TPMSealer(tcti: tpm.tcti, pin: pin).unseal(saved) == secret)
    }

    @Test func administratorResetEndsTheLockout() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 1, recoveryTime: 1000)
        let blob = try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "2468"), pinKDF: pinKDF).seal(SecretBytes.random(count: 16))
        #expect(tpmFailure { try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "9999")).unseal(blob) } == .authorizationFailed)
        #expect(tpmFailure { try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "2468")).unseal(blob) } == .lockedOut)
        try tpm.tools("tpm2_dictionarylockout", ["--clear-lockout"])
        #expect(try TPMSealer(tcti: tpm.tcti, pin: SecretBytes(utf8: "2468")).unseal(blob).count == 16)
        let status = try tpm.dictionaryAttack()
        #expect(status.maxTries == 1 && status.recoveryTime == 1000 && status.failedTries == 0)
    }
}
