// ReplabNode: one Berkeley DB Java Edition HA node for replab.
//
// It opens a ReplicatedEnvironment and serves replab's binary protocol on a second port of the
// node's site address. The command line and the protocol are specified in docs/bdbje.md; this file
// implements exactly that and nothing else.
//
// Build: javac -d CLASSES -cp je-18.3.12.jar ReplabNode.java
// Run:   java -cp je-18.3.12.jar:CLASSES ReplabNode --name n1 --env DIR --host H --port P ...

import com.sleepycat.je.CacheMode;
import com.sleepycat.je.CommitToken;
import com.sleepycat.je.Cursor;
import com.sleepycat.je.CursorConfig;
import com.sleepycat.je.Database;
import com.sleepycat.je.DatabaseConfig;
import com.sleepycat.je.DatabaseEntry;
import com.sleepycat.je.DatabaseNotFoundException;
import com.sleepycat.je.DbInternal;
import com.sleepycat.je.Durability;
import com.sleepycat.je.EnvironmentConfig;
import com.sleepycat.je.EnvironmentFailureException;
import com.sleepycat.je.Get;
import com.sleepycat.je.LockConflictException;
import com.sleepycat.je.LockMode;
import com.sleepycat.je.OperationResult;
import com.sleepycat.je.OperationStatus;
import com.sleepycat.je.ReadOptions;
import com.sleepycat.je.StatsConfig;
import com.sleepycat.je.Transaction;
import com.sleepycat.je.ReplicaConsistencyPolicy;
import com.sleepycat.je.TransactionConfig;
import com.sleepycat.je.rep.CommitPointConsistencyPolicy;
import com.sleepycat.je.rep.InsufficientAcksException;
import com.sleepycat.je.rep.InsufficientReplicasException;
import com.sleepycat.je.rep.NodeType;
import com.sleepycat.je.rep.NoConsistencyRequiredPolicy;
import com.sleepycat.je.rep.RepInternal;
import com.sleepycat.je.rep.ReplicaConsistencyException;
import com.sleepycat.je.rep.ReplicaWriteException;
import com.sleepycat.je.rep.ReplicatedEnvironment;
import com.sleepycat.je.rep.ReplicatedEnvironmentStats;
import com.sleepycat.je.rep.ReplicationConfig;
import com.sleepycat.je.rep.StateChangeEvent;
import com.sleepycat.je.rep.TimeConsistencyPolicy;
import com.sleepycat.je.rep.UnknownMasterException;
import com.sleepycat.je.dbi.EnvironmentImpl;
import com.sleepycat.je.rep.impl.RepImpl;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

public final class ReplabNode {

    // ---- configuration (from the command line) ----

    static final class Options {
        String name;
        String group = "replab";
        String envDir;
        String host;
        int port = -1;
        int clientPort = -1;
        String helpers;
        String nodeType = "ELECTABLE";
        String durability = "SYNC,NO_SYNC,SIMPLE_MAJORITY";
        long ackTimeoutMs = 5000;
        long cacheBytes = 0;
        final List<String[]> params = new ArrayList<>();
    }

    /** Thrown for a bad command line; printed as ERROR. */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String msg) {
            super(msg);
        }
    }

    static Options parseArgs(String[] args) throws UsageException {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                v = a.substring(eq + 1);
                a = a.substring(0, eq);
            } else {
                if (i + 1 >= args.length) {
                    throw new UsageException("missing value for " + a);
                }
                v = args[++i];
            }
            try {
                switch (a) {
                    case "--name": o.name = v; break;
                    case "--group": o.group = v; break;
                    case "--env": o.envDir = v; break;
                    case "--host": o.host = v; break;
                    case "--port": o.port = Integer.parseInt(v); break;
                    case "--client-port": o.clientPort = Integer.parseInt(v); break;
                    case "--helpers": o.helpers = v; break;
                    case "--node-type": o.nodeType = v; break;
                    case "--durability": o.durability = v; break;
                    case "--ack-timeout-ms": o.ackTimeoutMs = Long.parseLong(v); break;
                    case "--cache-bytes": o.cacheBytes = Long.parseLong(v); break;
                    case "--param": {
                        int e = v.indexOf('=');
                        if (e <= 0) {
                            throw new UsageException("--param wants NAME=VALUE, got " + v);
                        }
                        o.params.add(new String[] {v.substring(0, e), v.substring(e + 1)});
                        break;
                    }
                    default:
                        throw new UsageException("unknown option " + a);
                }
            } catch (NumberFormatException e) {
                throw new UsageException("bad number for " + a + ": " + v);
            }
        }
        if (o.name == null || o.name.isEmpty()) throw new UsageException("--name is required");
        if (o.envDir == null) throw new UsageException("--env is required");
        if (o.host == null) throw new UsageException("--host is required");
        if (o.port <= 0 || o.port > 65535) throw new UsageException("--port is required (1-65535)");
        if (o.clientPort <= 0 || o.clientPort > 65535) {
            throw new UsageException("--client-port is required (1-65535)");
        }
        if (o.helpers == null || o.helpers.isEmpty()) o.helpers = o.host + ":" + o.port;
        if (o.ackTimeoutMs <= 0) throw new UsageException("--ack-timeout-ms must be > 0");
        if (o.cacheBytes < 0) throw new UsageException("--cache-bytes must be >= 0");
        return o;
    }

    static Durability parseDurability(String s) throws UsageException {
        String[] p = s.split(",");
        if (p.length != 3) {
            throw new UsageException("--durability wants LOCAL,REPLICA,ACK, got " + s);
        }
        try {
            return new Durability(
                    Durability.SyncPolicy.valueOf(p[0].trim()),
                    Durability.SyncPolicy.valueOf(p[1].trim()),
                    Durability.ReplicaAckPolicy.valueOf(p[2].trim()));
        } catch (IllegalArgumentException e) {
            throw new UsageException("bad --durability " + s + " (sync: SYNC, WRITE_NO_SYNC, NO_SYNC;"
                    + " ack: ALL, SIMPLE_MAJORITY, NONE)");
        }
    }

    // ---- the environment and its databases ----

    // The databases, by number: the records, the lag probe's stamps, the verification journal.
    static final int KV = 0;
    static final int LAG = 1;
    static final int JOURNAL = 2;
    static final String[] DB_NAMES = {"kv", "replab_lag", "replab_journal"};

    /** One opened environment; replaced as a whole when JE requires a restart. */
    static final class Handle {
        final ReplicatedEnvironment env;
        volatile Database kv;
        volatile Database lag;
        volatile Database journal;
        volatile StateChangeEvent lastEvent;

        Handle(ReplicatedEnvironment env) {
            this.env = env;
        }

        Database get(int which) {
            switch (which) {
                case KV: return kv;
                case LAG: return lag;
                default: return journal;
            }
        }

        void set(int which, Database d) {
            switch (which) {
                case KV: kv = d; break;
                case LAG: lag = d; break;
                default: journal = d;
            }
        }

        boolean allOpen() {
            return kv != null && lag != null && journal != null;
        }
    }

    static Options opts;
    static Durability durability;
    static volatile Handle current; // null while (re)opening
    static volatile boolean shuttingDown;
    static volatile boolean exitingOnPurpose; // System.exit was called by us: do not force status 0
    static final Object reopenLock = new Object();
    static ServerSocket server;

    static ReplicatedEnvironment openEnv() throws UsageException {
        EnvironmentConfig ec = new EnvironmentConfig();
        ec.setAllowCreate(true);
        ec.setTransactional(true);
        ec.setDurability(durability);
        if (opts.cacheBytes > 0) ec.setCacheSize(opts.cacheBytes);

        ReplicationConfig rc = new ReplicationConfig(opts.group, opts.name, opts.host + ":" + opts.port);
        rc.setHelperHosts(opts.helpers);
        try {
            rc.setNodeType(NodeType.valueOf(opts.nodeType));
        } catch (IllegalArgumentException e) {
            throw new UsageException("bad --node-type " + opts.nodeType + " (ELECTABLE or SECONDARY)");
        }
        rc.setConfigParam(ReplicationConfig.REPLICA_ACK_TIMEOUT, opts.ackTimeoutMs + " ms");
        // Beginning a transaction waits for enough connected replicas under a timeout of its own
        // (default 10 s); the client's one timeout covers both waits.
        rc.setConfigParam(ReplicationConfig.INSUFFICIENT_REPLICAS_TIMEOUT, opts.ackTimeoutMs + " ms");
        // A restarted node whose group has no master (yet) still opens, in state UNKNOWN, and
        // goes on trying to join in the background.
        rc.setConfigParam(ReplicationConfig.ENV_UNKNOWN_STATE_TIMEOUT, "10 s");
        // Reads at a replica never wait for consistency (docs/bdbje.md: get, lag positions).
        rc.setConsistencyPolicy(NoConsistencyRequiredPolicy.NO_CONSISTENCY);

        for (String[] p : opts.params) {
            applyParam(ec, rc, p[0], p[1]);
        }
        File dir = new File(opts.envDir);
        if (!dir.isDirectory()) throw new UsageException("--env " + opts.envDir + " is not a directory");
        return new ReplicatedEnvironment(dir, rc, ec);
    }

    static void applyParam(EnvironmentConfig ec, ReplicationConfig rc, String name, String value)
            throws UsageException {
        IllegalArgumentException first;
        boolean repFirst = name.startsWith("je.rep.");
        try {
            if (repFirst) rc.setConfigParam(name, value);
            else ec.setConfigParam(name, value);
            return;
        } catch (IllegalArgumentException e) {
            first = e;
        }
        try {
            if (repFirst) ec.setConfigParam(name, value);
            else rc.setConfigParam(name, value);
        } catch (IllegalArgumentException e) {
            throw new UsageException("bad --param " + name + "=" + value + ": " + first.getMessage());
        }
    }

    static Handle newHandle(ReplicatedEnvironment env) {
        Handle h = new Handle(env);
        env.setStateChangeListener(ev -> h.lastEvent = ev); // called at once with the current state
        if (env.getState().isMaster()) {
            try {
                for (int i = 0; i < DB_NAMES.length; i++) db(h, i);
            } catch (RuntimeException e) {
                System.err.println("replab: creating databases at the master: " + e);
            }
        }
        return h;
    }

    /**
     * The database handle, opened on first use. At the master the database is created if needed;
     * elsewhere null is returned until the master has created it and the creation was replayed.
     */
    static Database db(Handle h, int which) {
        Database d = h.get(which);
        if (d != null) return d;
        synchronized (h) {
            d = h.get(which);
            if (d != null) return d;
            String name = DB_NAMES[which];
            DatabaseConfig dc = new DatabaseConfig();
            dc.setTransactional(true);
            if (h.env.getState().isMaster()) {
                dc.setAllowCreate(true);
                // The creation needs no acknowledgement: the first node of a group is master alone.
                TransactionConfig tc = new TransactionConfig();
                tc.setDurability(new Durability(durability.getLocalSync(),
                        durability.getReplicaSync(), Durability.ReplicaAckPolicy.NONE));
                Transaction t = h.env.beginTransaction(null, tc);
                boolean ok = false;
                try {
                    d = h.env.openDatabase(t, name, dc);
                    t.commit();
                    ok = true;
                } finally {
                    if (!ok) abortQuietly(t);
                }
            } else {
                dc.setAllowCreate(false);
                try {
                    d = h.env.openDatabase(null, name, dc);
                } catch (DatabaseNotFoundException e) {
                    return null;
                }
            }
            h.set(which, d);
            return d;
        }
    }

    static void abortQuietly(Transaction t) {
        try {
            t.abort();
        } catch (RuntimeException ignored) {
            // already committed, or the environment is invalid: nothing to undo here
        }
    }

    static void closeQuietly(Handle h) {
        if (h == null) return;
        for (Database d : new Database[] {h.kv, h.lag, h.journal}) {
            if (d == null) continue;
            try {
                d.close();
            } catch (RuntimeException ignored) {
                // an invalid environment's databases may refuse to close; the env close covers them
            }
        }
        try {
            h.env.close();
        } catch (RuntimeException e) {
            System.err.println("replab: closing environment: " + e);
        }
    }

    /** Why JE invalidated the environment (e.g. a RollbackException at a replica), for stderr. */
    static String invalidReason(Handle h) {
        try {
            EnvironmentImpl ei = DbInternal.getEnvironmentImpl(h.env);
            EnvironmentFailureException e = ei == null ? null : ei.getInvalidatingException();
            if (e != null) return e.getClass().getName() + ": " + e.getMessage();
        } catch (RuntimeException ignored) {
            // fall through
        }
        return "environment invalid";
    }

    /** Replaces an invalidated environment (RestartRequiredException and the like) by a new one. */
    static void reopen(Handle old, String why) {
        synchronized (reopenLock) {
            if (shuttingDown || current != old) return;
            System.err.println("replab: environment needs a restart (" + why + "); reopening");
            current = null; // clients get "unknown-master" meanwhile
            closeQuietly(old);
            long backoff = 500;
            while (!shuttingDown) {
                try {
                    ReplicatedEnvironment env = openEnv();
                    Handle h = newHandle(env);
                    if (shuttingDown) {
                        closeQuietly(h);
                        return;
                    }
                    current = h;
                    System.err.println("replab: environment reopened, state " + env.getState());
                    return;
                } catch (Exception e) {
                    System.err.println("replab: reopen failed: " + e + "; retrying");
                    try {
                        Thread.sleep(backoff);
                    } catch (InterruptedException ie) {
                        return;
                    }
                    backoff = Math.min(backoff * 2, 5000);
                }
            }
        }
    }

    /** Watches the environment: reopens it when invalid, creates the databases at a new master. */
    static void monitor() {
        while (!shuttingDown) {
            try {
                Thread.sleep(250);
            } catch (InterruptedException e) {
                return;
            }
            Handle h = current;
            if (h == null || shuttingDown) continue;
            try {
                if (!h.env.isValid()) {
                    reopen(h, invalidReason(h));
                    continue;
                }
                if (!h.allOpen() && h.env.getState().isMaster()) {
                    for (int i = 0; i < DB_NAMES.length; i++) db(h, i);
                }
            } catch (RuntimeException e) {
                if (!shuttingDown && !h.env.isValid()) reopen(h, e.toString());
            }
        }
    }

    // ---- protocol ----

    static final byte STATUS_OK = 'K';
    static final byte STATUS_ERR = 'E';
    static final int MAX_FRAME = 256 << 20;

    /** A failure reported to the client as an E frame. */
    static final class ProtoError extends Exception {
        private static final long serialVersionUID = 1L;
        final String code;
        final boolean close;

        ProtoError(String code, String msg, boolean close) {
            super(msg);
            this.code = code;
            this.close = close;
        }
    }

    static ProtoError badRequest(String msg) {
        return new ProtoError("bad-request", msg, true);
    }

    static void serveClient(Socket s) {
        try (Socket sock = s) {
            sock.setTcpNoDelay(true);
            DataInputStream in = new DataInputStream(new BufferedInputStream(sock.getInputStream(), 65536));
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(sock.getOutputStream(), 65536));
            while (true) {
                int len;
                try {
                    len = in.readInt();
                } catch (EOFException e) {
                    return; // the client closed
                }
                if (len <= 0 || len > MAX_FRAME) {
                    writeError(out, "bad-request", "frame length " + Integer.toUnsignedString(len));
                    return;
                }
                byte[] frame = new byte[len];
                in.readFully(frame);
                ByteArrayOutputStream body = new ByteArrayOutputStream();
                DataOutputStream res = new DataOutputStream(body);
                ProtoError err;
                try {
                    handle(ByteBuffer.wrap(frame), res);
                    err = null;
                } catch (ProtoError e) {
                    err = e;
                }
                if (err != null) {
                    writeError(out, err.code, err.getMessage());
                    if (err.close) return;
                } else {
                    byte[] b = body.toByteArray();
                    out.writeInt(b.length + 1);
                    out.writeByte(STATUS_OK);
                    out.write(b);
                    out.flush();
                }
            }
        } catch (IOException e) {
            // connection gone: nothing to answer
        }
    }

    static void writeError(DataOutputStream out, String code, String msg) throws IOException {
        byte[] c = code.getBytes(StandardCharsets.US_ASCII);
        byte[] m = (msg == null ? "" : msg).getBytes(StandardCharsets.UTF_8);
        out.writeInt(1 + 2 + c.length + m.length);
        out.writeByte(STATUS_ERR);
        out.writeShort(c.length);
        out.write(c);
        out.write(m);
        out.flush();
    }

    static void handle(ByteBuffer req, DataOutputStream res) throws ProtoError, IOException {
        byte op = req.get();
        Handle h = current;
        try {
            switch (op) {
                case 'P':
                    end(req);
                    return;
                case 'I':
                    opInsert(h, req, res);
                    return;
                case 'G':
                    opGet(h, req, res);
                    return;
                case 'Q':
                    opRead(h, req, res);
                    return;
                case 'J':
                    end(req);
                    opJournal(h(h), res);
                    return;
                case 'L':
                    end(req);
                    opLag(h(h), res);
                    return;
                case 'R':
                    opReset(h, req);
                    return;
                case 'S':
                    end(req);
                    res.write(stateJson(h).getBytes(StandardCharsets.UTF_8));
                    return;
                case 'H':
                    end(req);
                    opChecksum(h(h), res);
                    return;
                default:
                    throw badRequest("unknown op 0x" + Integer.toHexString(op & 0xff));
            }
        } catch (BufferUnderflowException e) {
            throw badRequest("frame too short for op " + (char) op);
        } catch (ProtoError | IOException e) {
            throw e;
        } catch (RuntimeException e) {
            throw mapException(h, e);
        }
    }

    static Handle h(Handle h) throws ProtoError {
        if (h == null) {
            throw new ProtoError("unknown-master", "environment is being (re)opened", false);
        }
        return h;
    }

    static void end(ByteBuffer req) throws ProtoError {
        if (req.hasRemaining()) throw badRequest(req.remaining() + " bytes after the payload");
    }

    static ProtoError mapException(Handle h, RuntimeException e) {
        String msg = e.getClass().getName() + ": " + e.getMessage();
        if (e instanceof ReplicaWriteException) return new ProtoError("replica", msg, false);
        if (e instanceof UnknownMasterException) return new ProtoError("unknown-master", msg, false);
        if (e instanceof InsufficientAcksException) return new ProtoError("insufficient-acks", msg, false);
        if (e instanceof InsufficientReplicasException) {
            return new ProtoError("insufficient-replicas", msg, false);
        }
        if (e instanceof LockConflictException) return new ProtoError("lock-timeout", msg, false);
        if (e instanceof ReplicaConsistencyException) return new ProtoError("consistency", msg, false);
        // The environment was invalidated under us, or replaced while this request ran.
        boolean invalid = h != null && !h.env.isValid();
        if (invalid && !shuttingDown) {
            Handle old = h;
            Thread t = new Thread(() -> reopen(old, msg), "replab-reopen");
            t.setDaemon(true);
            t.start();
        }
        if (invalid || (h != null && current != h) || e instanceof EnvironmentFailureException) {
            return new ProtoError("unknown-master", "environment needs a restart: " + msg, false);
        }
        return new ProtoError("other", msg, false);
    }

    /** A write needs the database; without it the node is not (yet) a master that created it. */
    static Database writeDb(Handle h, int which) throws ProtoError {
        Database d = db(h, which);
        if (d == null) {
            throw new ProtoError("replica", "node is " + h.env.getState() + ", not the master", false);
        }
        return d;
    }

    static void opInsert(Handle h0, ByteBuffer req, DataOutputStream res) throws ProtoError, IOException {
        int writer = req.getInt();
        long seq = req.getLong();
        int jwriter = req.getInt();
        long jseq = req.getLong();
        long n = req.getInt() & 0xffffffffL;
        if (n > req.remaining() / 6) throw badRequest("insert of " + n + " records in a short frame");
        byte[][] keys = new byte[(int) n][];
        byte[][] vals = new byte[(int) n][];
        for (int i = 0; i < n; i++) {
            int klen = req.getShort() & 0xffff;
            keys[i] = new byte[klen];
            req.get(keys[i]);
            long vlen = req.getInt() & 0xffffffffL;
            if (vlen > req.remaining()) throw badRequest("value longer than the frame");
            vals[i] = new byte[(int) vlen];
            req.get(vals[i]);
        }
        end(req);
        Handle h = h(h0);
        Database kv = writeDb(h, KV);
        Database lag = writer >= 0 ? writeDb(h, LAG) : null;
        Database journal = jseq > 0 ? writeDb(h, JOURNAL) : null;
        if (n == 0 && lag == null && journal == null && !h.env.getState().isMaster()) {
            // an empty insert writes nothing, so JE would not refuse it: still a master-only op
            throw new ProtoError("replica", "node is " + h.env.getState() + ", not the master", false);
        }
        Transaction t = h.env.beginTransaction(null, null);
        boolean finished = false;
        try {
            DatabaseEntry k = new DatabaseEntry();
            DatabaseEntry v = new DatabaseEntry();
            for (int i = 0; i < n; i++) {
                k.setData(keys[i]);
                v.setData(vals[i]);
                kv.put(t, k, v);
            }
            if (lag != null) {
                lag.put(t, new DatabaseEntry(be32(writer)), new DatabaseEntry(be64(seq)));
            }
            if (journal != null) {
                byte[] key = ByteBuffer.allocate(12).putInt(jwriter).putLong(jseq).array();
                journal.put(t, new DatabaseEntry(key), new DatabaseEntry(new byte[0]));
            }
            finished = true; // from here commit decides whether to abort
            commit(h, t);
        } finally {
            if (!finished) abortQuietly(t);
        }
        res.writeInt((int) n);
        CommitToken ct = t.getCommitToken();
        res.writeLong(ct == null ? 0 : ct.getVLSN());
        if (ct == null) {
            res.writeShort(0);
        } else {
            res.writeShort(24);
            res.writeLong(ct.getRepenvUUID().getMostSignificantBits());
            res.writeLong(ct.getRepenvUUID().getLeastSignificantBits());
            res.writeLong(ct.getVLSN());
        }
    }

    /**
     * Commits t. What a failed commit left is told apart, for the client's verification journal
     * and history: JE refuses some commits before it writes the commit record (not master, no
     * master known, too few replicas connected: the transaction is aborted here and the error
     * keeps its code, so the client knows nothing committed); InsufficientAcksException comes
     * after the record is written (committed locally, not acknowledged); anything else —
     * the environment failing, an interrupt — leaves the outcome unknown: "commit-unknown".
     */
    static void commit(Handle h, Transaction t) throws ProtoError {
        try {
            t.commit();
        } catch (InsufficientReplicasException | ReplicaWriteException | UnknownMasterException e) {
            abortQuietly(t);
            throw e;
        } catch (InsufficientAcksException e) {
            throw e;
        } catch (RuntimeException e) {
            ProtoError pe = mapException(h, e); // reopens an invalidated environment
            throw new ProtoError("commit-unknown", pe.getMessage(), false);
        }
    }

    static void opGet(Handle h0, ByteBuffer req, DataOutputStream res) throws ProtoError, IOException {
        int klen = req.getShort() & 0xffff;
        byte[] key = new byte[klen];
        req.get(key);
        end(req);
        Handle h = h(h0);
        Database kv = db(h, KV);
        if (kv == null) {
            res.writeByte(0);
            return;
        }
        DatabaseEntry v = new DatabaseEntry();
        OperationResult r = kv.get(null, new DatabaseEntry(key), v, Get.SEARCH, (ReadOptions) null);
        if (r == null) {
            res.writeByte(0);
            return;
        }
        byte[] b = v.getData() == null ? new byte[0] : v.getData();
        res.writeByte(1);
        res.writeInt(v.getSize());
        res.write(b, v.getOffset(), v.getSize());
    }

    // A read of several keys in one read-only transaction. At a replica the transaction first
    // meets the consistency policy asked for (JE waits in beginTransaction, up to the timeout, and
    // then throws ReplicaConsistencyException: "consistency"); at the master every policy holds.
    static final int READ_MASTER_ONLY = 1;

    static void opRead(Handle h0, ByteBuffer req, DataOutputStream res) throws ProtoError, IOException {
        int flags = req.get() & 0xff;
        byte policy = req.get();
        long timeoutMs = req.getInt() & 0xffffffffL;
        long maxLagMs = req.getLong();
        int tlen = req.getShort() & 0xffff;
        byte[] token = new byte[tlen];
        req.get(token);
        long n = req.getInt() & 0xffffffffL;
        if (n > req.remaining() / 2) throw badRequest("read of " + n + " keys in a short frame");
        byte[][] keys = new byte[(int) n][];
        for (int i = 0; i < n; i++) {
            keys[i] = new byte[req.getShort() & 0xffff];
            req.get(keys[i]);
        }
        end(req);
        ReplicaConsistencyPolicy cp;
        switch (policy) {
            case 'N':
                cp = NoConsistencyRequiredPolicy.NO_CONSISTENCY;
                break;
            case 'T':
                if (maxLagMs < 0) throw badRequest("time consistency with a negative lag");
                cp = new TimeConsistencyPolicy(maxLagMs, TimeUnit.MILLISECONDS, timeoutMs, TimeUnit.MILLISECONDS);
                break;
            case 'C': {
                if (tlen == 0) {
                    cp = NoConsistencyRequiredPolicy.NO_CONSISTENCY; // no commit of the client's to wait for
                    break;
                }
                if (tlen != 24) throw badRequest("commit token of " + tlen + " bytes, want 24");
                ByteBuffer tb = ByteBuffer.wrap(token);
                UUID uuid = new UUID(tb.getLong(), tb.getLong());
                cp = new CommitPointConsistencyPolicy(new CommitToken(uuid, tb.getLong()), timeoutMs,
                        TimeUnit.MILLISECONDS);
                break;
            }
            default:
                throw badRequest("unknown consistency policy 0x" + Integer.toHexString(policy & 0xff));
        }
        Handle h = h(h0);
        if ((flags & READ_MASTER_ONLY) != 0 && !h.env.getState().isMaster()) {
            throw new ProtoError("replica", "node is " + h.env.getState() + ", not the master", false);
        }
        TransactionConfig tc = new TransactionConfig().setReadOnly(true).setConsistencyPolicy(cp);
        Transaction t = h.env.beginTransaction(null, tc);
        boolean committed = false;
        try {
            Database kv = db(h, KV); // after the wait: the database may have arrived meanwhile
            res.writeInt((int) n);
            DatabaseEntry v = new DatabaseEntry();
            for (byte[] key : keys) {
                if (kv == null || kv.get(t, new DatabaseEntry(key), v, Get.SEARCH, (ReadOptions) null) == null) {
                    res.writeByte(0);
                    continue;
                }
                res.writeByte(1);
                res.writeInt(v.getSize());
                if (v.getData() != null) res.write(v.getData(), v.getOffset(), v.getSize());
            }
            t.commit();
            committed = true;
        } finally {
            if (!committed) abortQuietly(t);
        }
    }

    /** Every key of the verification journal this node holds (committed). */
    static void opJournal(Handle h, DataOutputStream res) throws IOException {
        Database journal = db(h, JOURNAL);
        ByteArrayOutputStream rows = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(rows);
        int count = 0;
        if (journal != null) {
            CursorConfig cc = new CursorConfig();
            cc.setReadCommitted(true);
            try (Cursor c = journal.openCursor(null, cc)) {
                c.setCacheMode(CacheMode.UNCHANGED);
                DatabaseEntry k = new DatabaseEntry();
                DatabaseEntry v = new DatabaseEntry();
                v.setPartial(0, 0, true);
                while (c.getNext(k, v, LockMode.DEFAULT) == OperationStatus.SUCCESS) {
                    if (k.getSize() != 12) continue;
                    ByteBuffer kb = ByteBuffer.wrap(k.getData(), k.getOffset(), 12);
                    out.writeInt(kb.getInt());
                    out.writeLong(kb.getLong());
                    count++;
                }
            }
        }
        res.writeInt(count);
        rows.writeTo(res);
    }

    // The stamps a reader sees now. A stamp counts once its transaction has
    // committed here; a read must not wait for one that has not: a poll
    // blocked on replay's lock would return at the commit but widen the
    // probe's window by the wait. So the keys come from a scan that takes no
    // locks, and each stamp is then read committed in a no-wait transaction;
    // one still locked by replay keeps its last value at the client.
    static final TransactionConfig LAG_READ = new TransactionConfig().setNoWait(true).setReadCommitted(true);

    static void opLag(Handle h, DataOutputStream res) throws IOException {
        Database lag = db(h, LAG);
        List<long[]> rows = new ArrayList<>();
        if (lag != null) {
            List<byte[]> keys = new ArrayList<>();
            try (Cursor c = lag.openCursor(null, CursorConfig.READ_UNCOMMITTED)) {
                DatabaseEntry k = new DatabaseEntry();
                DatabaseEntry v = new DatabaseEntry();
                v.setPartial(0, 0, true);
                while (c.getNext(k, v, LockMode.READ_UNCOMMITTED) == OperationStatus.SUCCESS) {
                    if (k.getSize() == 4) {
                        keys.add(Arrays.copyOfRange(k.getData(), k.getOffset(), k.getOffset() + 4));
                    }
                }
            }
            Transaction t = h.env.beginTransaction(null, LAG_READ);
            try {
                DatabaseEntry v = new DatabaseEntry();
                for (byte[] key : keys) {
                    OperationStatus st;
                    try {
                        st = lag.get(t, new DatabaseEntry(key), v, LockMode.READ_COMMITTED);
                    } catch (LockConflictException e) {
                        continue; // replay holds it: not committed here yet
                    }
                    if (st != OperationStatus.SUCCESS || v.getSize() != 8) continue;
                    ByteBuffer kb = ByteBuffer.wrap(key);
                    ByteBuffer vb = ByteBuffer.wrap(v.getData(), v.getOffset(), 8);
                    rows.add(new long[] {kb.getInt(), vb.getLong()});
                }
            } finally {
                abortQuietly(t);
            }
        }
        res.writeInt(rows.size());
        for (long[] r : rows) {
            res.writeInt((int) r[0]);
            res.writeLong(r[1]);
        }
    }

    static void opReset(Handle h0, ByteBuffer req) throws ProtoError {
        long writers = req.getInt() & 0xffffffffL;
        end(req);
        if (writers > 1_000_000) throw badRequest("reset of " + writers + " writers");
        Handle h = h(h0);
        Database lag = writeDb(h, LAG);
        Transaction t = h.env.beginTransaction(null, null);
        boolean finished = false;
        try {
            DatabaseEntry zero = new DatabaseEntry(be64(0));
            for (int w = 0; w < writers; w++) {
                lag.put(t, new DatabaseEntry(be32(w)), zero);
            }
            try {
                t.commit();
            } finally {
                finished = true;
            }
        } finally {
            if (!finished) abortQuietly(t);
        }
    }

    static void opChecksum(Handle h, DataOutputStream res) throws IOException {
        Database kv = db(h, KV);
        long records = 0;
        long sum = 0;
        if (kv != null) {
            CursorConfig cc = new CursorConfig();
            cc.setReadCommitted(true);
            try (Cursor c = kv.openCursor(null, cc)) {
                c.setCacheMode(CacheMode.UNCHANGED);
                DatabaseEntry k = new DatabaseEntry();
                DatabaseEntry v = new DatabaseEntry();
                while (c.getNext(k, v, LockMode.DEFAULT) == OperationStatus.SUCCESS) {
                    long x = 0xcbf29ce484222325L;
                    x = fnv(x, k);
                    x = fnv(x, v);
                    sum += x;
                    records++;
                }
            }
        }
        res.writeLong(records);
        res.writeLong(sum);
    }

    static long fnv(long x, DatabaseEntry e) {
        byte[] b = e.getData();
        if (b == null) return x;
        for (int i = e.getOffset(), end = e.getOffset() + e.getSize(); i < end; i++) {
            x ^= b[i] & 0xff;
            x *= 0x100000001b3L;
        }
        return x;
    }

    static byte[] be32(int v) {
        return ByteBuffer.allocate(4).putInt(v).array();
    }

    static byte[] be64(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    // ---- state ----

    static String stateJson(Handle h) {
        String state = "UNKNOWN";
        String master = "";
        long vlsn = 0;
        StringBuilder replicas = new StringBuilder("{");
        if (h != null) {
            ReplicatedEnvironment env = h.env;
            try {
                ReplicatedEnvironment.State st = env.getState();
                state = st.name();
                StateChangeEvent ev = h.lastEvent;
                if ((st.isMaster() || st.isReplica()) && ev != null
                        && (ev.getState().isMaster() || ev.getState().isReplica())) {
                    master = ev.getMasterNodeName();
                }
                if (st.isMaster() && master.isEmpty()) master = opts.name;
            } catch (RuntimeException e) {
                state = "DETACHED";
            }
            try {
                RepImpl ri = RepInternal.getRepImpl(env);
                if (ri != null) vlsn = Math.max(0, ri.getVLSNIndex().getRange().getLast().getSequence());
            } catch (RuntimeException e) {
                // no VLSN index (environment closing): report 0
            }
            if ("MASTER".equals(state)) {
                try {
                    StatsConfig sc = new StatsConfig();
                    ReplicatedEnvironmentStats rs = env.getRepStats(sc);
                    Map<String, Long> commit = rs.getReplicaLastCommitVLSNMap();
                    Map<String, Long> lagMap = rs.getReplicaVLSNLagMap();
                    TreeSet<String> names = new TreeSet<>();
                    if (commit != null) names.addAll(commit.keySet());
                    if (lagMap != null) names.addAll(lagMap.keySet());
                    boolean first = true;
                    for (String n : names) {
                        if (!first) replicas.append(',');
                        first = false;
                        Long c = commit == null ? null : commit.get(n);
                        Long l = lagMap == null ? null : lagMap.get(n);
                        replicas.append(jsonString(n)).append(":{\"vlsn\":")
                                .append(c == null ? 0 : Math.max(0, c))
                                .append(",\"lag_vlsn\":").append(l == null ? 0 : Math.max(0, l))
                                .append('}');
                    }
                } catch (RuntimeException e) {
                    // statistics unavailable (state changing): an empty map
                }
            }
        }
        replicas.append('}');
        long heapUsed = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        long heapMax = Runtime.getRuntime().maxMemory();
        long gcCount = 0;
        long gcTime = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (gc.getCollectionCount() > 0) gcCount += gc.getCollectionCount();
            if (gc.getCollectionTime() > 0) gcTime += gc.getCollectionTime();
        }
        StringBuilder sb = new StringBuilder();
        sb.append("{\"node\":").append(jsonString(opts.name))
                .append(",\"state\":").append(jsonString(state))
                .append(",\"master\":").append(jsonString(master))
                .append(",\"group\":").append(jsonString(opts.group))
                .append(",\"vlsn\":").append(vlsn)
                .append(",\"replicas\":").append(replicas)
                .append(",\"heap_used_bytes\":").append(heapUsed)
                .append(",\"heap_max_bytes\":").append(heapMax)
                .append(",\"gc_count\":").append(gcCount)
                .append(",\"gc_time_ms\":").append(gcTime)
                .append('}');
        return sb.toString();
    }

    static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    // ---- main ----

    static void fail(String msg) {
        exitingOnPurpose = true;
        System.out.println("ERROR " + msg.replace('\n', ' '));
        System.out.flush();
        System.exit(1);
    }

    public static void main(String[] args) {
        try {
            opts = parseArgs(args);
            durability = parseDurability(opts.durability);
        } catch (UsageException e) {
            fail(e.getMessage());
            return;
        }

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            shuttingDown = true;
            try {
                if (server != null) server.close();
            } catch (IOException ignored) {
                // closing anyway
            }
            synchronized (reopenLock) {
                Handle h = current;
                current = null;
                closeQuietly(h);
            }
            System.out.flush();
            System.err.flush();
            if (!exitingOnPurpose) Runtime.getRuntime().halt(0); // SIGTERM: a clean exit
        }, "replab-shutdown"));

        try {
            server = new ServerSocket();
            server.setReuseAddress(true);
            server.bind(new InetSocketAddress(InetAddress.getByName(opts.host), opts.clientPort), 256);
        } catch (IOException e) {
            fail("client port " + opts.host + ":" + opts.clientPort + ": " + e.getMessage());
            return;
        }

        Handle h;
        try {
            h = newHandle(openEnv());
        } catch (UsageException e) {
            fail(e.getMessage());
            return;
        } catch (RuntimeException e) {
            fail("opening the environment: " + e.getClass().getName() + ": " + e.getMessage());
            return;
        }
        current = h;

        Thread mon = new Thread(ReplabNode::monitor, "replab-monitor");
        mon.setDaemon(true);
        mon.start();

        String st;
        try {
            st = h.env.getState().name();
        } catch (RuntimeException e) {
            st = "UNKNOWN";
        }
        System.out.println("READY " + st);
        System.out.flush();

        AtomicInteger clients = new AtomicInteger();
        while (!shuttingDown) {
            Socket s;
            try {
                s = server.accept();
            } catch (IOException e) {
                if (shuttingDown) break;
                System.err.println("replab: accept: " + e);
                continue;
            }
            Thread t = new Thread(() -> serveClient(s), "replab-client-" + clients.incrementAndGet());
            t.setDaemon(true);
            t.start();
        }
    }
}
