/*
 * The fenced refresh lease across hosts (TokenRefresher.refreshLeased over PostgresStore's
 * lockbox.refresh_leases): take, expire, take over, fenced store, release, with host crashes
 * and a failover to the synchronous standby as model actions. docs/ARCHITECTURE.md
 * ("Model-checked cross-host protocols") maps every step below to the SQL and Swift.
 *
 * Properties (assertions):
 *   - at most one token-endpoint call per lease epoch: no fence is used for two calls, and
 *     two calls never overlap while both their leases are live (a holder that stalls past
 *     its lease may still call: what a lease cannot prevent, docs/ARCHITECTURE.md);
 *   - a stalled holder stores nothing: tokens are stored only under the newest lease any host
 *     was given, and stored tokens only move forward (a later lease's never replaced by an
 *     earlier one's).
 *
 * Mutants (spin -D...), each must fail the check:
 *   NO_FENCE           completeRefresh deletes the lease row without checking its fence
 *   TAKE_LIVE          acquireRefreshLease takes the lease over while it is still live
 *   ACT_BEFORE_COMMIT  the host takes the lease from the RETURNING row before COMMIT has
 *                      completed (reached the synchronous standby)
 */

#ifndef NH
#define NH        2    /* hosts refreshing the same expired tokens (at most 2 here) */
#endif
#ifndef TURNS
#define TURNS     2    /* turns of refreshLeased's loop per host (fences stay below 8) */
#endif
#ifndef MAXEXP
#define MAXEXP    2    /* leases that run out (the database's clock passes expires_at) */
#endif
#ifndef MAXCRASH
#define MAXCRASH  1    /* host crashes in a run */
#endif

/* Committed state of the primary (P_) and of the synchronous standby (S_): the lease row's
 * fence (0: no row), the sequence refresh_lease_fences, and the fence of the lease under which
 * the stored tokens were written (0: the expired tokens every host starts from). */
byte P_lf, S_lf;
byte P_seq, S_seq;
byte P_tokf, S_tokf;
byte unshipped;        /* hosts whose latest commit is on the primary only (one bit each) */

bool standby = true;
byte gen;              /* bumped on the failover: open transactions and connections are gone */
byte lockh;            /* holder of the lease row's lock: 0, or host + 1 */
byte crashes, failovers, nexp;

byte expired;          /* the fences whose lease has run out (one bit each): time, not data */
byte called;           /* ghost: the fences a token-endpoint call was made under */
byte incall;           /* ghost: hosts in a token-endpoint call (a crashed one stays) */
byte hf[NH];           /* ghost: the fence each host holds */
byte maxf;             /* ghost: the newest fence any host was given */

#define EXPIRED(f) ((expired & (1 << (f))) != 0)

active proctype WalSender() {
end:
    do
    :: atomic { standby && unshipped != 0 ->
           S_lf = P_lf; S_seq = P_seq; S_tokf = P_tokf; unshipped = 0 }
    od
}

/* The primary is SIGKILLed and the standby promoted: what the standby lacked is lost, the
 * sequence included (its advance is WAL the standby may not have). */
active proctype Failover() {
    atomic { standby && failovers < 1 ->
        failovers++; standby = false; gen++; lockh = 0;
        P_lf = S_lf; P_seq = S_seq; P_tokf = S_tokf; unshipped = 0 }
}

/* The database's clock passes the live lease's expires_at. */
active proctype Clock() {
end:
    do
    :: atomic { nexp < MAXEXP && P_lf != 0 && !EXPIRED(P_lf) -> expired = expired | (1 << P_lf); nexp++ }
    od
}

#define CRASHPOINT \
    if \
    :: atomic { crashes < MAXCRASH -> crashes++; if :: lockh == h + 1 && gen == myGen -> lockh = 0 :: else fi } -> goto crashed \
    :: true \
    fi

#define AWAIT_COMMIT(lostlabel) \
    atomic { (gen != myGen) || !standby || (unshipped & (1 << h)) == 0 -> if :: gen != myGen -> goto lostlabel :: else fi }

/* releaseRefreshLease: DELETE … WHERE address AND fence (autocommit; its errors ignored). */
#define RELEASE \
    atomic { lockh == 0 -> lockh = h + 1; myGen = gen }; \
    CRASHPOINT; \
    atomic { if :: gen != myGen -> goto failed :: else fi; \
             if :: P_lf == f -> P_lf = 0 :: else fi; unshipped = unshipped | (1 << h); lockh = 0 }

proctype Host(byte h) {
    byte turn, myGen, f;
    bool got, held;
    do
    :: turn < TURNS ->
        turn++;
        /* currentTokens: a plain read; usable tokens (another host refreshed) end the call. */
        if :: P_tokf != 0 -> goto finished :: else fi;
        CRASHPOINT;
        /* acquireRefreshLease: INSERT … VALUES (nextval(…), clock_timestamp() + d)
         * ON CONFLICT DO UPDATE … WHERE l.expires_at <= clock_timestamp() RETURNING fence. */
        atomic { lockh == 0 -> lockh = h + 1; myGen = gen }
        CRASHPOINT;
        atomic {
            if :: gen != myGen -> goto failed :: else fi;
            P_seq++;   /* nextval: not undone by a rollback */
            if
#ifndef TAKE_LIVE
            :: P_lf == 0 || EXPIRED(P_lf) -> got = true; f = P_seq
            :: else -> got = false
#else
            /* Mutant: ON CONFLICT DO UPDATE without WHERE l.expires_at <= clock_timestamp(). */
            :: got = true; f = P_seq
#endif
            fi
        }
        CRASHPOINT;
        /* The statement's implicit COMMIT: on the primary, then on the standby. */
        atomic {
#ifndef ACT_BEFORE_COMMIT
            if :: gen != myGen -> goto failed :: else fi;
#else
            /* The row was already taken as the answer: a commit lost with the primary goes unseen. */
            if :: gen != myGen -> goto taken :: else fi;
#endif
            if :: got -> P_lf = f :: else fi;
            unshipped = unshipped | (1 << h); lockh = 0
        }
#ifdef ACT_BEFORE_COMMIT
taken:
#endif
#ifndef ACT_BEFORE_COMMIT
        CRASHPOINT;
        AWAIT_COMMIT(failed);
#endif
        if :: !got -> goto nextTurn :: else fi;   /* another holder's lease is live: poll */
        atomic { hf[h] = f; if :: f > maxf -> maxf = f :: else fi }
        CRASHPOINT;
        /* Read again under the lease: a holder may have stored and let go meanwhile. */
        if :: P_tokf != 0 -> RELEASE; goto finished :: else fi;
        CRASHPOINT;
        /* The token endpoint is called under lease f. */
        atomic {
            assert(!(called & (1 << f)));
            assert(EXPIRED(f) || !(incall & (1 << (1 - h))) || EXPIRED(hf[1 - h]));
            called = called | (1 << f); incall = incall | (1 << h)
        }
        CRASHPOINT;
        if
        :: incall = incall & ~(1 << h)   /* new tokens */
        :: incall = incall & ~(1 << h); RELEASE; goto failed   /* the call failed */
        fi;
        CRASHPOINT;
        /* completeRefresh, one transaction: SELECT key_check … FOR SHARE; DELETE FROM
         * refresh_leases WHERE address = … AND fence = … RETURNING true; the upsert; COMMIT. */
        atomic { lockh == 0 -> lockh = h + 1; myGen = gen }
        CRASHPOINT;
        atomic {
            if :: gen != myGen -> goto failed :: else fi;
#ifdef NO_FENCE
            held = true   /* DELETE … WHERE address = …: whatever lease is there */
#else
            held = (P_lf == f)
#endif
        }
        CRASHPOINT;
        atomic {
            if :: gen != myGen -> goto failed :: else fi;
            if
            :: held ->
                /* A stalled holder stores nothing; stored tokens only move forward. */
                assert(f == maxf && f > P_tokf);
                if :: P_lf == f -> P_lf = 0 :: else fi;
                P_tokf = f
            :: else
            fi;
            unshipped = unshipped | (1 << h); lockh = 0
        }
        CRASHPOINT;
        AWAIT_COMMIT(failed);
        if :: held -> goto finished :: else fi;   /* stored */
        /* "token refresh outlived its lease": the next turn reads the other host's tokens. */
nextTurn:
        atomic { got = false; held = false; f = 0 }
    :: turn >= TURNS -> break
    od;
finished:
failed:
crashed:
    skip
}

init {
    atomic { run Host(0); run Host(1) }
}
