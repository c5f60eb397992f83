/*
 * The conditional PIN change across hosts (PinGuard.changeAcrossHosts over PostgresStore's
 * set(_:for:options:ifCurrent:)), with host crashes and a failover to the synchronous standby
 * as model actions. docs/ARCHITECTURE.md ("Model-checked cross-host protocols") maps every
 * step below to the SQL and Swift that implement it.
 *
 * Every host knows the PIN that is set (0) and changes it to its own (host h: h + 1); a PIN
 * record is identified by the PIN in it (each record's bytes are unique: a fresh salt).
 * Counting the old-PIN guess in the ledger is models/pin_ledger.pml's part, left out here.
 *
 * Property: no PIN change is undone. At most one change reports success, and once every host
 * has finished or crashed, the record that survives a failover is the one that change wrote.
 *
 * Mutants (spin -D...), each must fail the check:
 *   NO_COMPARE         the write does not compare the locked row with the record read first
 *                      (a plain upsert)
 *   ACT_BEFORE_COMMIT  success is reported once the upsert ran, before COMMIT has completed
 *                      (reached the synchronous standby)
 */

#ifndef NH
#define NH        3    /* hosts changing the same PIN at once (at most 3) */
#endif
#ifndef TRIES
#define TRIES     2    /* PinGuard.conditionalWriteTries, bounded */
#endif
#ifndef MAXCRASH
#define MAXCRASH  1
#endif

/* Committed PIN record on the primary and on the synchronous standby: the PIN it holds. */
byte P_rec, S_rec;
byte unshipped;

bool standby = true;
byte gen;
byte lockh;            /* holder of the record row's lock (SELECT … FOR UPDATE): 0, or host + 1 */
byte crashes, failovers;

byte acked;            /* ghost: the PIN of the change that reported success (0: none) */
byte done;

#define DURABLE_REC (standby -> S_rec : P_rec)

active proctype WalSender() {
end:
    do
    :: atomic { standby && unshipped != 0 -> S_rec = P_rec; unshipped = 0 }
    od
}

active proctype Failover() {
    atomic { standby && failovers < 1 ->
        failovers++; standby = false; gen++; lockh = 0; P_rec = S_rec; unshipped = 0 }
}

#define CRASHPOINT \
    if \
    :: atomic { crashes < MAXCRASH -> crashes++; if :: lockh == h + 1 && gen == myGen -> lockh = 0 :: else fi } -> goto crashed \
    :: true \
    fi

proctype Host(byte h) {
    byte try, myGen, before, loaded;
    bool same;
    do
    :: try < TRIES ->
        try++;
        /* before = route.store.get(profile.itemKey): a plain read. */
        before = P_rec;
        CRASHPOINT;
        /* verifyCounted(oldPin): load(profile), a second plain read, and the old PIN (0)
         * compared with the hash of what it read. */
        loaded = P_rec;
        if :: loaded != 0 -> goto finished :: else fi;   /* wrongPin (a counted wrong try) */
        CRASHPOINT;
        /* store.set(…, ifCurrent: before), one transaction: BEGIN; SELECT key_check FROM
         * lockbox.vault FOR SHARE; SELECT metadata, secret FROM lockbox.items WHERE address = …
         * FOR UPDATE; opened and compared with `before`; the upsert; COMMIT. */
        atomic { lockh == 0 -> lockh = h + 1; myGen = gen }
        CRASHPOINT;
        atomic {
            if :: gen != myGen -> goto failed :: else fi;
#ifdef NO_COMPARE
            same = true
#else
            same = (P_rec == before)
#endif
        }
        CRASHPOINT;
#ifdef ACT_BEFORE_COMMIT
        /* Mutant: success reported on the upsert, before COMMIT has completed. */
        if :: same -> atomic { assert(acked == 0); acked = h + 1 } :: else fi;
        atomic {
            if
            :: gen != myGen -> skip   /* the commit is lost with the primary, unseen */
            :: else -> if :: same -> P_rec = h + 1 :: else fi; unshipped = unshipped | (1 << h); lockh = 0
            fi
        }
        if :: same -> goto finished :: else fi;
#else
        atomic {
            if :: gen != myGen -> goto failed :: else fi;
            if :: same -> P_rec = h + 1 :: else fi;
            unshipped = unshipped | (1 << h); lockh = 0
        }
        CRASHPOINT;
        /* COMMIT's reply: once the commit is on the synchronous standby. */
        atomic { (gen != myGen) || !standby || (unshipped & (1 << h)) == 0 -> if :: gen != myGen -> goto failed :: else fi }
        if :: same -> atomic { assert(acked == 0); acked = h + 1 }; goto finished :: else fi;
#endif
        /* Another host's write came first: start over against it. */
        atomic { before = 0; loaded = 0; same = false }
    :: try >= TRIES -> break   /* vaultBusy */
    od;
finished:
failed:
crashed:
    done++
}

init {
    byte i;
    atomic {
        for (i : 0 .. NH - 1) { run Host(i) }
        i = 0
    }
    /* No change is undone: the change that reported success is the record that survives. */
    atomic { done == NH -> assert(acked == 0 || DURABLE_REC == acked) }
}
