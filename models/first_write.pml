/*
 * The first write of a device ID across hosts (DeviceIdentity.identifier over PostgresStore's
 * setIfAbsent), with host crashes and a failover to the synchronous standby as model actions.
 * docs/ARCHITECTURE.md ("Model-checked cross-host protocols") maps every step below to the SQL
 * and Swift that implement it.
 *
 * A host that dies while its commit waits for the standby does not end that wait: the server
 * does not notice a closed client connection while waiting (client_connection_check_interval
 * off, the default), and the transaction ends when the standby confirms. CANCELLED_WAIT models
 * the other case, a wait cancelled (pg_cancel_backend, pg_terminate_backend, a cancel request):
 * PostgreSQL then ends the transaction with the commit on the primary only, visible to others.
 *
 * Property: one ID. Every host that returns an ID returns the same one, and once every host
 * has finished or crashed, it is the ID that survives a failover.
 *
 * Mutants (spin -D...), each must fail the check:
 *   OVERWRITE          the insert replaces a row that is there (ON CONFLICT DO UPDATE) instead
 *                      of keeping the first (ON CONFLICT DO NOTHING, then reading the winner's)
 *   ACT_BEFORE_COMMIT  the host returns its ID once the INSERT … RETURNING row came back,
 *                      before COMMIT has completed (reached the synchronous standby)
 */

#ifndef NH
#define NH        3    /* hosts asking for the ID at once (at most 3) */
#endif
#ifndef MAXCRASH
#define MAXCRASH  1
#endif

/* The device-ID row as committed on the primary and on the standby: the ID (0: no row). */
byte P_id, S_id;
byte unshipped;

bool standby = true;
byte gen;
byte ins;              /* host + 1 whose INSERT holds the address (the primary key's index
                          entry): a second inserter waits until it ends, and no other session
                          sees the row until then */
bool pend;             /* that INSERT is committed on the primary and waits for the standby:
                          PostgreSQL still shows it as running (locks held, row not visible) */
byte crashes, failovers;

byte used;             /* ghost: the ID hosts returned (0: none yet) */
byte done;

#define DURABLE_ID (standby -> S_id : P_id)
#define VISIBLE_ID (ins == 0 -> P_id : 0)          /* what another session reads */

active proctype WalSender() {
end:
    do
    :: atomic { standby && unshipped != 0 -> S_id = P_id; unshipped = 0;
           /* The waiting commit is confirmed: its transaction ends, with or without its client. */
           if :: pend -> pend = false; ins = 0 :: else fi }
    od
}

active proctype Failover() {
    atomic { standby && failovers < 1 ->
        failovers++; standby = false; gen++; ins = 0; pend = false; P_id = S_id; unshipped = 0 }
}

#define CRASHPOINT \
    if \
    :: atomic { crashes < MAXCRASH -> crashes++; if :: ins == h + 1 && gen == myGen && (!pend || CANCEL) -> ins = 0; pend = false :: else fi } -> goto crashed \
    :: true \
    fi

#ifdef CANCELLED_WAIT
#define CANCEL true
#else
#define CANCEL false
#endif

#define RETURN_ID \
    atomic { assert(used == 0 || used == got); used = got }

proctype Host(byte h) {
    byte myGen, got;
    bool mine;
    /* read(key): a plain read; an ID that is there is returned. */
    if :: VISIBLE_ID != 0 -> got = VISIBLE_ID; RETURN_ID; goto finished :: else fi;
    CRASHPOINT;
    /* setIfAbsent, in one transaction: BEGIN; SELECT key_check … FOR SHARE; INSERT INTO
     * lockbox.items … ON CONFLICT (address) DO NOTHING RETURNING true (waiting for another
     * inserter of the address to commit or roll back); if it inserted nothing, SELECT the row. */
    atomic {
        ins == 0 -> myGen = gen;
#ifdef OVERWRITE
        mine = true; ins = h + 1
#else
        if :: P_id == 0 -> mine = true; ins = h + 1 :: else -> mine = false fi
#endif
    }
    atomic { if :: mine -> got = h + 1 :: else -> got = P_id fi }
    CRASHPOINT;
#ifdef ACT_BEFORE_COMMIT
    RETURN_ID;
    CRASHPOINT;
    atomic {
        if
        :: gen != myGen -> skip   /* the commit is lost with the primary, unseen */
        :: else -> if :: mine -> P_id = h + 1; if :: standby -> pend = true :: else -> ins = 0 fi :: else fi; unshipped = unshipped | (1 << h)
        fi
    }
#else
    atomic {
        if :: gen != myGen -> goto failed :: else fi;
        if :: mine -> P_id = h + 1; if :: standby -> pend = true :: else -> ins = 0 fi :: else fi;
        unshipped = unshipped | (1 << h)
    }
    CRASHPOINT;
    /* COMMIT's reply: once the commit is on the synchronous standby. */
    atomic { (gen != myGen) || !standby || (unshipped & (1 << h)) == 0 -> if :: gen != myGen -> goto failed :: else fi }
    RETURN_ID;
#endif
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
    /* One ID, and it is the one that survives. */
    atomic { done == NH -> assert(used == 0 || DURABLE_ID == used) }
}
