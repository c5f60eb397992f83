/*
 * The PIN attempt ledger across hosts (PinGuard.verifyCounted over PostgresStore's
 * lockbox.begin_pin_attempt), with host crashes and a failover to the synchronous standby as
 * model actions. docs/ARCHITECTURE.md ("Model-checked cross-host protocols") maps every step
 * below to the SQL and Swift that implement it.
 *
 * Property: every evaluated guess is counted. Once every host has finished or crashed, each
 * guess that was compared with the PIN's hash has its count in the state that survives a
 * failover (on the synchronous standby; after the failover, on the promoted primary); counts
 * only ever become durable, never less, so checking at the end sees every loss. And each
 * evaluated guess has a count of its own (no two evaluated between two clears of the row have
 * the same count), none past the policy's disable limit, and none past its wipe limit: the
 * ledger refuses from LockoutPolicy.evaluationLimit (the wipe or the disable limit, whichever
 * comes first), and a host refused at the wipe limit does the wipe that is due.
 *
 * Mutants (spin -D...), each must fail the check:
 *   COMPARE_BEFORE_COUNT  the hash is compared before begin_pin_attempt counts the guess
 *   ACT_BEFORE_COMMIT     the host acts on begin_pin_attempt's row before its COMMIT has
 *                         completed (reached the synchronous standby)
 *   NO_ROW_LOCK           begin_pin_attempt reads the count without SELECT … FOR UPDATE
 *   NO_WIPE_LIMIT         the ledger is given the disable limit alone (not evaluationLimit), so
 *                         a guess counted past the wipe limit, by another host or after a wipe
 *                         that never ran, is evaluated
 */

#ifndef NH
#define NH        2    /* hosts guessing (PinGuard.verify on each): init runs two */
#endif
#ifndef G0
#define G0        2    /* guesses of host 0 (at most 2) */
#endif
#ifndef G1
#define G1        1    /* guesses of host 1 (at most 2) */
#endif
#ifndef D
#define D         3    /* LockoutPolicy.disableAfter */
#endif
#ifndef W
#define W         2    /* LockoutPolicy.wipeAfter */
#endif
#ifndef DELAYFROM
#define DELAYFROM 2    /* LockoutPolicy.delay(afterFailures: k) > 0 for k >= DELAYFROM */
#endif
#ifndef MAXT
#define MAXT      1    /* ticks of the database's clock, each longer than any delay */
#endif
#ifndef MAXCRASH
#define MAXCRASH  1    /* host crashes in a run */
#endif
#define NOTIME    255  /* last_attempt IS NULL */

/* Committed state of the primary (P_) and of the synchronous standby (S_): the pin_attempts
 * row (failures, last_attempt; no row = 0, NULL), the PIN record and a wiped item (rows of
 * lockbox.items). */
byte P_fail, S_fail;
byte P_ep, S_ep;       /* ghost: the count's epoch, one more at each clear of the row */
byte P_last = NOTIME, S_last = NOTIME;
bool P_rec = true, S_rec = true;
bool P_item = true, S_item = true;
byte unshipped;        /* hosts whose latest commit is on the primary only (one bit each) */
/* Ghost: one bit per guess (host h, guess g: bit 2h + g - 1), set in the state where
 * that guess's count is committed (a later DELETE of the row does not clear it). */
byte P_cnt, S_cnt;

bool standby = true;   /* a synchronous standby exists (until the failover) */
byte gen;              /* bumped at the failover: every open transaction and every
                          connection of the old primary is gone */
byte lockh;            /* holder of the pin_attempts row lock: 0, or host + 1 */
byte now;              /* the database's clock */
byte crashes, failovers;

byte evaluated;        /* ghost: the bits of the guesses compared with the hash */
byte seen[4];          /* ghost: per epoch, the counts (one bit each) of the guesses compared */
byte done;             /* hosts finished or crashed */

#define BIT(h, g)  (1 << ((h) * 2 + (g) - 1))
#define DURABLE    (standby -> S_cnt : P_cnt)   /* what survives a failover */

/* The WAL sender: the standby receives a prefix of the primary's WAL, here all of it. */
active proctype WalSender() {
end:
    do
    :: atomic { standby && unshipped != 0 ->
           S_fail = P_fail; S_ep = P_ep; S_last = P_last; S_rec = P_rec; S_item = P_item; unshipped = 0;
           S_cnt = P_cnt }
    od
}

/* The primary is SIGKILLed and the standby promoted: what the standby lacked is lost. */
active proctype Failover() {
    atomic { standby && failovers < 1 ->
        failovers++; standby = false; gen++; lockh = 0;
        P_fail = S_fail; P_ep = S_ep; P_last = S_last; P_rec = S_rec; P_item = S_item; unshipped = 0;
        P_cnt = S_cnt }
}


/* The database's clock passes every running delay. */
active proctype Clock() {
end:
    do
    :: atomic { now < MAXT -> now++ }
    od
}

/* A guess is evaluated (compared with the hash): within one epoch of the count, no two
 * evaluated guesses have the same count (each has its own), and none is past disableAfter. */
#define EVALUATE \
    assert(counted <= D); \
    assert((seen[ep] & (1 << counted)) == 0); seen[ep] = seen[ep] | (1 << counted); \
    evaluated = evaluated | BIT(h, g)

/* A host may crash between any two steps: its connection dies, so an open transaction of it
 * aborts and its row lock is released; it does nothing more. */
#define CRASHPOINT \
    if \
    :: atomic { crashes < MAXCRASH -> crashes++; if :: lockh == h + 1 && gen == myGen -> lockh = 0 :: else fi; } -> goto crashed \
    :: true \
    fi

/* COMMIT's reply: it comes once the commit is on the synchronous standby (at once without
 * one); a primary gone before that is a lost connection, whether or not the commit survived. */
#define AWAIT_COMMIT(lostlabel) \
    atomic { (gen != myGen) || !standby || (unshipped & (1 << h)) == 0 -> if :: gen != myGen -> goto lostlabel :: else fi }

/* A one-statement write transaction (a DELETE) with effect `effect`: TX_LOCKED takes the
 * pin_attempts row lock first (a DELETE of that row), TX_PLAIN does not (other rows). */
#define TX_LOCKED(effect, lostlabel) \
    atomic { lockh == 0 -> lockh = h + 1; myGen = gen }; \
    CRASHPOINT; \
    atomic { if :: gen != myGen -> goto lostlabel :: else fi; \
             effect; unshipped = unshipped | (1 << h); lockh = 0 }; \
    CRASHPOINT; \
    AWAIT_COMMIT(lostlabel)

#define TX_PLAIN(effect, lostlabel) \
    myGen = gen; \
    CRASHPOINT; \
    atomic { if :: gen != myGen -> goto lostlabel :: else fi; \
             effect; unshipped = unshipped | (1 << h) }; \
    CRASHPOINT; \
    AWAIT_COMMIT(lostlabel)

proctype Host(byte h; byte guesses) {
    byte g, myGen, prev, counted, ep;
    bool evaluate, right, wipeDue;
    do
    :: g < guesses ->
        g++;
        if :: right = true :: right = false fi;   /* whether this guess is the PIN */
        /* PinGuard.verifyCounted: load(profile), a plain read of the PIN record. */
        if :: !P_rec -> goto nextGuess :: else fi;   /* pinNotSet */
        CRASHPOINT;
#ifdef COMPARE_BEFORE_COUNT
        /* Mutant: the hash compared first. */
        evaluated = evaluated | BIT(h, g);
        CRASHPOINT;
#endif
        /* begin_pin_attempt: INSERT … ON CONFLICT DO NOTHING, then SELECT … FOR UPDATE. */
#ifndef NO_ROW_LOCK
        atomic { lockh == 0 -> lockh = h + 1; myGen = gen }
#else
        /* Mutant: the row read without FOR UPDATE (a concurrent guess's count can be lost). */
        myGen = gen;
#endif
        CRASHPOINT;
        /* clock_timestamp() read under the lock; LockoutPolicy.decide; UPDATE failures + 1. */
        atomic {
            if :: gen != myGen -> goto lost :: else fi;
            prev = P_fail; ep = P_ep;
            wipeDue = (prev >= W);   /* PinGuard: decide(failures: before) == .wipe */
            if
#ifndef NO_WIPE_LIMIT
            :: prev >= D || prev >= W -> evaluate = false           /* past evaluationLimit */
#else
            :: prev >= D -> evaluate = false                                    /* disabled */
#endif
            :: prev < D && prev >= DELAYFROM && P_last == now -> evaluate = false  /* wait */
            :: else -> evaluate = true; counted = prev + 1
            fi
        }
        CRASHPOINT;
#ifdef ACT_BEFORE_COMMIT
        /* Mutant: the row read as the decision before COMMIT has completed. */
        if
        :: evaluate -> atomic { EVALUATE }
        :: else
        fi;
        CRASHPOINT;
#endif
        /* The statement's implicit COMMIT: on the primary, then on the standby. */
        atomic {
            if :: gen != myGen -> goto lost :: else fi;
            if :: evaluate -> P_fail = counted; P_last = now; P_cnt = P_cnt | BIT(h, g) :: else fi;
            unshipped = unshipped | (1 << h); prev = 0;
            if :: lockh == h + 1 -> lockh = 0 :: else fi
        }
        CRASHPOINT;
#ifndef ACT_BEFORE_COMMIT
        AWAIT_COMMIT(lost);
#else
        /* The row was already taken as the answer: the commit completes, or is lost, unseen. */
        atomic { (gen != myGen) || !standby || (unshipped & (1 << h)) == 0 }
#endif
        if
        :: !evaluate && wipeDue -> goto wipe   /* a wipe that is due: done, nothing evaluated */
        :: !evaluate && !wipeDue -> goto nextGuess   /* pinLockedOut / pinDisabled */
        :: else
        fi;
        CRASHPOINT;
#if !defined(COMPARE_BEFORE_COUNT) && !defined(ACT_BEFORE_COMMIT)
        /* compare(pin, with: record.hash): the guess is evaluated. */
        atomic { EVALUATE }
#endif
        assert(counted <= W);   /* never evaluated past the wipe limit */
        CRASHPOINT;
        if
        :: right ->
            /* recordPinSuccess: DELETE FROM lockbox.pin_attempts. */
            TX_LOCKED(P_fail = 0; P_last = NOTIME; P_ep++, lost)
        :: !right && counted >= W ->
wipe:       /* Wipe: the listed items, the PIN record, then the count (three transactions). */
            TX_PLAIN(P_item = false, lost);
            CRASHPOINT;
            TX_PLAIN(P_rec = false, lost);
            CRASHPOINT;
            TX_LOCKED(P_fail = 0; P_last = NOTIME; P_ep++, lost)
        :: else   /* wrongPin, or pinDisabled once counted >= D: nothing more is written */
        fi;
        goto nextGuess;
lost:   /* connectionLost: the call fails; the host goes on with its next guess */
        skip;
nextGuess:
        atomic { prev = 0; counted = 0; ep = 0; evaluate = false; right = false; wipeDue = false }
    :: g >= guesses -> break
    od;
crashed:
    done++
}

/* Every evaluated guess is counted: once every host has finished or crashed, each guess
 * compared with the hash has its count in the state that survives a failover (counts only
 * become durable, never less: checking at the end sees every loss). */
init {
    atomic { run Host(0, G0); run Host(1, G1) }
    atomic { done == NH -> assert((evaluated & DURABLE) == evaluated) }
}
