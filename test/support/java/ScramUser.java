// Sets the SCRAM credentials of a user on a running broker, as `kafka-configs.sh --alter
// --add-config 'SCRAM-SHA-512=[password=…]' --entity-type users` does (that tool is not on the
// broker's classpath in Kafka 4.x): creates the user, or rotates its password.
// Usage: java -cp <kafka classpath> ScramUser.java <bootstrap> <SCRAM-SHA-256|SCRAM-SHA-512> <user> <password>
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;

public class ScramUser {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    ScramMechanism mechanism = ScramMechanism.fromMechanismName(args[1]);
    try (Admin admin = Admin.create(props)) {
      admin
          .alterUserScramCredentials(
              List.of(
                  new UserScramCredentialUpsertion(
                      args[2], new ScramCredentialInfo(mechanism, 8192), args[3])))
          .all()
          .get();
    }
  }
}
