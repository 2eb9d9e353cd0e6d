// Runs a Kotlin script compiled by `kotlinc main.kts -d .` (the class Main, whose
// constructor is the script's body): compiled once per submission, a script then
// starts in a fraction of a second instead of being compiled on every run.
import java.lang.reflect.InvocationTargetException

fun main(args: Array<String>) {
    val script = Class.forName("Main")
    try {
        script.getConstructor(Array<String>::class.java).newInstance(args as Any)
    } catch (e: InvocationTargetException) {
        throw e.targetException
    }
}
