// Kafka's own Java producer driven line by line from standard input, so that tests write batches
// as production producers do (compression, linger, idempotence, transactions) and know exactly
// what was written. java-producer.ts compiles it once; it also runs as a single source file:
// java -cp <kafka classpath> Producer.java ...
//
// Arguments: <bootstrap> <topic> [key=value producer settings ...]
// Standard input, one command a line, numbered from 1 in the order received:
//   r<TAB><partition><TAB><value>   send a record (value: the rest of the line, UTF-8)
//   begin | commit | abort          transaction control (needs transactional.id)
//   flush                           wait until every record sent so far is acknowledged
//   close                           flush, close and exit
// Standard output, one answer a line (records answer once acknowledged, in any order):
//   ready                           the producer is connected (and its transactions initialised)
//   ack <n> <partition> <offset>    record n is written at this offset
//   err <n> <message>               record or command n failed
//   ok <n>                          command n completed
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class Producer {
  private static PrintStream answers;

  private static void answer(String line, boolean now) {
    synchronized (answers) {
      answers.println(line);
      if (now) answers.flush();
    }
  }

  private static String oneLine(Throwable e) {
    String message = e.getClass().getSimpleName() + ": " + e.getMessage();
    return message.replace('\n', ' ').replace('\r', ' ');
  }

  public static void main(String[] args) throws Exception {
    // Answers go to the real standard output; anything a library prints goes to standard error.
    answers =
        new PrintStream(
            new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
            false,
            StandardCharsets.UTF_8);
    System.setOut(System.err);
    if (args.length < 2) {
      System.err.println("usage: Producer.java <bootstrap> <topic> [key=value ...]");
      System.exit(2);
    }
    String topic = args[1];
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    for (int i = 2; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      if (eq <= 0) throw new IllegalArgumentException("not key=value: " + args[i]);
      props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    boolean transactional = props.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG);

    // Acknowledgements are answered from the producer's I/O thread without a flush each; this
    // flushes them out a few milliseconds later.
    Thread flusher =
        new Thread(
            () -> {
              while (true) {
                try {
                  Thread.sleep(5);
                } catch (InterruptedException e) {
                  return;
                }
                synchronized (answers) {
                  answers.flush();
                }
              }
            });
    flusher.setDaemon(true);
    flusher.start();

    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      if (transactional) producer.initTransactions();
      producer.partitionsFor(topic); // connected, and the topic's metadata known
      answer("ready", true);
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
      long n = 0;
      String line;
      while ((line = in.readLine()) != null) {
        final long seq = ++n;
        try {
          if (line.startsWith("r\t")) {
            int tab = line.indexOf('\t', 2);
            if (tab < 0) throw new IllegalArgumentException("record line without a value");
            String p = line.substring(2, tab);
            Integer partition = p.equals("-") ? null : Integer.valueOf(p);
            String value = line.substring(tab + 1);
            producer.send(
                new ProducerRecord<>(topic, partition, null, value),
                (metadata, error) -> {
                  if (error != null) answer("err " + seq + " " + oneLine(error), false);
                  else
                    answer(
                        "ack " + seq + " " + metadata.partition() + " " + metadata.offset(), false);
                });
            continue;
          }
          switch (line) {
            case "begin":
              producer.beginTransaction();
              break;
            case "commit":
              producer.commitTransaction();
              break;
            case "abort":
              producer.abortTransaction();
              break;
            case "flush":
              producer.flush();
              break;
            case "close":
              producer.flush();
              answer("ok " + seq, true);
              return;
            default:
              throw new IllegalArgumentException("unknown command: " + line);
          }
          answer("ok " + seq, true);
        } catch (Exception e) {
          answer("err " + seq + " " + oneLine(e), true);
        }
      }
    } finally {
      synchronized (answers) {
        answers.flush();
      }
    }
  }
}
